package reclaim

import (
	"context"
	"fmt"
	"slices"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// divergence keeps the first problem a check finds.
type divergence struct{ first *string }

func (d *divergence) fail(format string, args ...any) bool {
	if d.first == nil {
		s := fmt.Sprintf(format, args...)
		d.first = &s
	}
	return false
}

func appendAll(st *localseg.Store, evs []localseg.Event) error {
	for i, ev := range evs {
		res, err := st.Append(ev)
		if err != nil {
			return fmt.Errorf("append event %d: %w", i+1, err)
		}
		if res.Seq != uint64(i+1) {
			return fmt.Errorf("append event %d got sequence %d", i+1, res.Seq)
		}
	}
	return nil
}

// checkRetained scans from 0 and checks the scan is clamped to the base,
// gapless to the tip, and byte-identical to what was appended; and that
// nothing the consumer had not acked is gone.
func checkRetained(st *localseg.Store, appended []localseg.Event, reclaimedSeq, acked uint64, dv *divergence) (int, bool) {
	page, err := st.Scan(0, len(appended)+1)
	if err != nil {
		return 0, dv.fail("scan after reclaim: %v", err)
	}
	n := len(page.Records)
	switch {
	case reclaimedSeq > acked:
		return n, dv.fail("reclaimed through %d, past the consumer at %d", reclaimedSeq, acked)
	case page.Base != reclaimedSeq+1:
		return n, dv.fail("scan base %d, want %d", page.Base, reclaimedSeq+1)
	case reclaimedSeq > 0 && !page.Clamped:
		return n, dv.fail("a scan from 0 below the base %d is not reported as clamped", page.Base)
	case uint64(n) != uint64(len(appended))-reclaimedSeq:
		return n, dv.fail("scan returned %d records, want %d", n, uint64(len(appended))-reclaimedSeq)
	}
	for i, r := range page.Records {
		want := reclaimedSeq + uint64(i) + 1
		ev := appended[want-1]
		if r.Seq != want || r.ExecutionID != ev.ExecutionID || r.TransactionID != ev.TransactionID || r.Payload != ev.Payload {
			return n, dv.fail("record %d is %+v, want sequence %d %+v", i, r, want, ev)
		}
	}
	return n, true
}

// durableInBucket returns the set of the store's sealed segments whose
// bucket object has the local length and digest (never mere presence of
// the key).
func durableInBucket(ctx context.Context, b blobtier.Bucket, shard uint32, st *localseg.Store) (func(uint64) bool, error) {
	snap, err := st.Snapshot()
	if err != nil {
		return nil, err
	}
	set := map[uint64]bool{}
	for _, s := range snap.Segments {
		if !s.Sealed {
			continue
		}
		info, err := b.Stat(ctx, blobtier.SegmentKey(shard, s.ID))
		if err != nil {
			continue // not durable (absent or unverifiable)
		}
		data, err := st.ReadSegment(s.ID)
		if err != nil {
			return nil, fmt.Errorf("read segment %d: %w", s.ID, err)
		}
		set[s.ID] = info.Meta.Length == int64(len(data)) && info.Meta.XXH64 == blobtier.Digest(data)
	}
	return func(id uint64) bool { return set[id] }, nil
}

// shardKeys lists every segment and tail key of a shard, sorted.
func shardKeys(ctx context.Context, b blobtier.Bucket, shard uint32) ([]string, error) {
	var keys []string
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for info, err := range b.List(ctx, shard, kind) {
			if err != nil {
				return nil, fmt.Errorf("list shard %d: %w", shard, err)
			}
			keys = append(keys, info.Key)
		}
	}
	slices.Sort(keys)
	return keys, nil
}
