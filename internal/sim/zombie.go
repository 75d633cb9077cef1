package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
)

// forgeZombie ends a run that calmed down (every acknowledged event is in
// the bucket) by forging a takeover on a copy of the bucket: a claim and
// a start record of epoch 1 that cut epoch 0 at the restored tip, then a
// stale writer's (epoch 0) tail object and segment beyond the cut, written
// straight to the bucket. Every reader must follow the lineage: a restore
// holds exactly what it held before the forgery, and verify finds no
// problem and counts both forged objects as zombies. It draws no random
// number, so every seed keeps its schedule.
func (r *run) forgeZombie(ctx context.Context) *violation {
	b := r.w.clean() // a copy: the live bucket is not touched
	before, err := r.restoreFrom(ctx, b)
	if err != nil {
		return nil // calm's own restore has judged the bucket
	}
	var highest uint64
	for info, err := range b.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			r.logf("forge zombie: list -> %s", errClass(err))
			return nil
		}
		if info.ParseErr == nil {
			highest = max(highest, info.Parsed.Segment)
		}
	}
	tip := before.tip
	mark := min(tip, max(before.base, 1)-1)
	cut := fencing.NewStartRecord(1, 0, tip, highest, mark)
	claim, err := fencing.Claim{Epoch: 1, Owner: "sim/forged", Nonce: fencing.NewNonce()}.Encode()
	if err != nil {
		return fail("zombie-forge", "encode the claim: %v", err)
	}
	rec, err := cut.Encode()
	if err != nil {
		return fail("zombie-forge", "encode the cut: %v", err)
	}
	var img []byte
	for s := tip + 1; s <= tip+3; s++ {
		f := localseg.Frame{Kind: localseg.KindEvent, Seq: s, ExecutionID: "zombie", TransactionID: "z" + strconv.FormatUint(s, 10), Payload: "zombie"}
		if img, err = localseg.EncodeFrame(img, &f); err != nil {
			return fail("zombie-forge", "encode a frame: %v", err)
		}
	}
	for _, o := range []struct {
		key  string
		data []byte
	}{
		{blobtier.ClaimKey(0, 1), claim}, {blobtier.StartKey(0, 1), rec},
		{blobtier.TailKey(0, tip+1, tip+3), img}, {blobtier.SegmentKey(0, cut.FenceSegment), img},
	} {
		if err := b.PutIfAbsent(ctx, o.key, o.data, 0); err != nil {
			if errors.Is(err, blobtier.ErrConflict) {
				r.logf("forge zombie: %s is taken; not forged", o.key)
				return nil
			}
			return fail("zombie-forge", "put %s: %v", o.key, err)
		}
	}
	r.stats.Faults["forged-zombie"]++
	r.logf("forge zombie: cut epoch 0 at %d (fence %d), zombie objects beyond", tip, cut.FenceSegment)
	after, err := r.restoreFrom(ctx, b)
	if err != nil {
		return fail("zombie-restore-failed", "restore after a forged zombie: %v", err)
	}
	if after.tip != before.tip || !slices.Equal(after.records, before.records) || !maps.Equal(after.consumers, before.consumers) {
		return fail("zombie-visible", "a restore after the cut at %d holds %d records through %d (before: %d through %d)",
			tip, len(after.records), after.tip, len(before.records), before.tip)
	}
	rep, err := bucketlog.Verify(ctx, "", b, coldload.VerifyOptions{Shards: []uint32{0}, ShardCount: 1, Concurrency: 1, Now: r.w.now})
	if err != nil {
		return fail("zombie-verify", "verify after a forged zombie: %v", err)
	}
	for _, p := range rep.Problems {
		if p.Class == coldload.ProblemGap || p.Class == coldload.ProblemConflict || p.Class == coldload.ProblemLineage {
			return fail("zombie-verify", "verify after a forged zombie: %s %s: %s", p.Class, p.Key, p.Detail)
		}
	}
	if z := rep.Shards[0].ZombieObjects; z != 2 {
		return fail("zombie-verify", "verify counts %d zombie objects, want the 2 forged", z)
	}
	return nil
}

// restoreFrom restores shard 0 from b into a fresh directory and reads it.
func (r *run) restoreFrom(ctx context.Context, b blobtier.Bucket) (restored, error) {
	r.w.fresh++
	dir := filepath.Join(r.w.root, fmt.Sprintf("restore-%d", r.w.fresh))
	r.stats.Restores++
	if _, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: b, Dir: dir, AllowEmpty: true, Concurrency: 1}); err != nil {
		return restored{}, err
	}
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, ReadOnly: true, Now: r.w.now, Logger: quiet})
	if err != nil {
		return restored{}, fmt.Errorf("open the restored store: %w", err)
	}
	defer l.Close()
	return readLog(l)
}
