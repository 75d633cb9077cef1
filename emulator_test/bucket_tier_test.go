package emulator_test

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
)

// Scenario 1 (issue 3, CHECKLIST §3.4, 3.5, 3.7, 3.8, 3.10, 3.3 at rest):
// thousands of events over many 4 KiB segments and two consumers are
// shipped with the active segment sealed; the local disk is deleted; the
// bucket alone restores every record byte for byte and the cursors; the
// restored store continues the sequence and its new segment keys are above
// every key the bucket had; a non-owner reads the owner's shard by a cold
// load; a byte flipped or a tail cut off in one segment object at rest
// makes Restore fail naming that key and Verify list it.
func TestBucketTier(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			// The heaviest scenario: the two backends run side by side.
			t.Parallel()
			bucketTier(t, be)
		})
	}
}

func bucketTier(t *testing.T, be backend) {
	start := time.Now()
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	const shards = 2
	execs := execsOf(0, shards, 12)
	root := t.TempDir()
	opts := bucketlog.Options{Dir: root, ShardIndex: 0, ShardCount: shards, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true}
	l := open(t, opts)

	// One event per append first (each its own fsync), then batches.
	want := appendN(t, l, execs, 0, 1000, 1)
	if pr, err := l.Pull(ctx, "c1", 10); err != nil || !pr.Created || pr.Pending != 1000 {
		t.Fatalf("first pull: %+v %v", pr, err)
	}
	if _, err := l.Ack(ctx, "c1", 700); err != nil {
		t.Fatal(err)
	}
	// c2 is created and never acks: its cursor is 0 and must survive too.
	if pr, err := l.Pull(ctx, "c2", 1); err != nil || !pr.Created {
		t.Fatalf("pull c2: %+v %v", pr, err)
	}
	var uploaded int64
	rep, err := l.Ship(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	uploaded += rep.Upload.Bytes
	want = append(want, appendN(t, l, execs, 1000, 3000, 25)...)
	if _, err := l.Ack(ctx, "c1", 2500); err != nil {
		t.Fatal(err)
	}
	rep, err = l.Ship(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	uploaded += rep.Upload.Bytes
	if !rep.Sealed || rep.ShippedThrough != 3000 || rep.Tip != 3000 || rep.Upload.Pending != 0 {
		t.Fatalf("ship with the active segment sealed: %+v", rep)
	}
	sameRecords(t, "owner", scanAll(t, l).Records, want)
	snap := snapshot(t, l)
	wantConsumers := map[string]uint64{"c1": 2500, "c2": 0}
	if !maps.Equal(snap.Consumers, wantConsumers) {
		t.Fatalf("owner consumers %v, want %v", snap.Consumers, wantConsumers)
	}
	sealed, nSealed := sealedBytes(snap)
	if active := snap.Segments[len(snap.Segments)-1]; active.Sealed || active.Size != 0 || nSealed != len(snap.Segments)-1 {
		t.Fatalf("after Ship(seal): active segment %+v, %d sealed of %d", active, nSealed, len(snap.Segments))
	}
	if nSealed < 50 {
		t.Fatalf("only %d segments: the workload must roll over many times", nSealed)
	}

	// Each byte is uploaded once: the bytes put under segment keys, the
	// bytes the bucket holds and the bytes the ship passes reported all
	// equal the bytes sealed.
	segs := objects(t, v.b, 0, blobtier.KindSegment)
	put, repeated := v.puts.segmentPuts(0)
	if len(segs) != nSealed || totalSize(segs) != sealed || put != sealed || uploaded != sealed || len(repeated) != 0 {
		t.Fatalf("sealed %d segments / %d bytes; bucket holds %d / %d bytes; put %d bytes (%d keys more than once); ship reported %d bytes",
			nSealed, sealed, len(segs), totalSize(segs), put, len(repeated), uploaded)
	}
	for _, s := range segs {
		if len(s.Key) != 40 {
			t.Fatalf("segment key %q is not 40 characters", s.Key)
		}
	}
	// Every event is in a durable segment: cleanup left no tail object.
	if tails := objects(t, v.b, 0, blobtier.KindTail); len(tails) != 0 {
		t.Fatalf("%d tail objects left after every segment became durable: %v", len(tails), tails)
	}
	closeLog(t, l)
	destroy(t, root)

	// The bucket alone.
	root2, rr := restore(t, v.b, 0, bucketlog.RestoreOptions{})
	maxSeen := maxSegmentID(segs)
	if rr.FirstSeq != 1 || rr.LastSeq != 3000 || rr.Segments != nSealed || rr.SegmentBytes != sealed ||
		rr.TailRecords != 0 || rr.Consumers != 2 || len(rr.ClampedCursors) != 0 || rr.NextSegment <= maxSeen ||
		// Read: the cursor object, the watermark object (tail cleanup
		// commits its durable_seq there) and every segment; no tail.
		rr.Objects != nSealed+2 || rr.Bytes != sealed {
		t.Fatalf("restore report: %+v (bucket's highest segment id %d)", rr, maxSeen)
	}
	r := open(t, bucketlog.Options{Dir: root2, ShardIndex: 0, ShardCount: shards, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true})
	sameRecords(t, "restored", scanAll(t, r).Records, want)
	if got := snapshot(t, r).Consumers; !maps.Equal(got, wantConsumers) {
		t.Fatalf("restored consumers %v, want %v", got, wantConsumers)
	}
	if pr, err := r.Pull(ctx, "c1", 5); err != nil || pr.Created || pr.Acked != 2500 || pr.Pending != 500 || pr.Records[0].Seq != 2501 {
		t.Fatalf("restored c1 pull: %+v %v", pr, err)
	}

	// The restored store continues the sequence, and its segments get ids
	// above every id the bucket has seen.
	more := appendN(t, r, execs, 3000, 3200, 10)
	if more[0].Seq != 3001 {
		t.Fatalf("first append after restore got %d, want 3001", more[0].Seq)
	}
	want = append(want, more...)
	if rep, err = r.Ship(ctx, true); err != nil || rep.ShippedThrough != 3200 {
		t.Fatalf("ship after restore: %+v %v", rep, err)
	}
	before := map[string]bool{}
	for _, s := range segs {
		before[s.Key] = true
	}
	segs2 := objects(t, v.b, 0, blobtier.KindSegment)
	var fresh []string
	for _, s := range segs2 {
		if !before[s.Key] {
			fresh = append(fresh, s.Key)
			if s.Parsed.Segment <= maxSeen {
				t.Fatalf("new segment %s is not above the bucket's highest id %d", s.Key, maxSeen)
			}
		}
	}
	if len(fresh) == 0 || len(segs2) != len(segs)+len(fresh) {
		t.Fatalf("after the restored store shipped: %d objects, %d before, new %v", len(segs2), len(segs), fresh)
	}
	// Still each byte once, across both owners.
	sealed2, _ := sealedBytes(snapshot(t, r))
	if put, repeated := v.puts.segmentPuts(0); put != sealed2 || totalSize(segs2) != sealed2 || len(repeated) != 0 {
		t.Fatalf("sealed %d bytes over both owners; put %d (%d keys more than once); bucket holds %d", sealed2, put, len(repeated), totalSize(segs2))
	}

	// A non-owner (shard 1 of 2) reads shard 0's executions from the bucket.
	n := open(t, bucketlog.Options{Dir: t.TempDir(), ShardIndex: 1, ShardCount: shards, Bucket: v.b, NoBackground: true})
	for _, x := range execs[:3] {
		cold, err := n.ReadExecution(ctx, x, 0, 100000)
		if err != nil {
			t.Fatalf("non-owner read of %s: %v", x, err)
		}
		own, err := r.ReadExecution(ctx, x, 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		if cold.ServedBy != affinity.ServedByNonOwnerColdLoad || cold.Shard != 0 || own.ServedBy != affinity.ServedByOwnerResident {
			t.Fatalf("read of %s served by %q (shard %d), owner's by %q", x, cold.ServedBy, cold.Shard, own.ServedBy)
		}
		var mine []localseg.Record
		for _, rec := range want {
			if rec.ExecutionID == x {
				mine = append(mine, rec)
			}
		}
		sameRecords(t, "owner read of "+x, own.Page.Records, mine)
		sameRecords(t, "non-owner read of "+x, cold.Page.Records, mine)
	}
	// Shard 1 has nothing in the bucket: a non-owner read of it is empty,
	// not an error; a restore of it refuses unless AllowEmpty.
	if res, err := r.ScanShard(ctx, 1, 0, 10); err != nil || res.Page.Exists || len(res.Page.Records) != 0 || res.ServedBy != affinity.ServedByNonOwnerColdLoad {
		t.Fatalf("non-owner scan of the empty shard 1: %+v %v", res, err)
	}
	if _, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: v.b, Shard: 1, Dir: t.TempDir()}); !errors.Is(err, bucketlog.ErrInvalidState) {
		t.Fatalf("restore of the empty shard 1: %v, want an invalid state", err)
	}
	if _, rr1 := restore(t, v.b, 1, bucketlog.RestoreOptions{AllowEmpty: true}); !rr1.Empty || rr1.LastSeq != 0 {
		t.Fatalf("restore of the empty shard 1 with AllowEmpty: %+v", rr1)
	}
	closeLog(t, n)
	closeLog(t, r)
	segs2 = objects(t, v.b, 0, blobtier.KindSegment)

	// A healthy bucket verifies clean.
	vr, err := bucketlog.Verify(ctx, "", v.b, coldload.VerifyOptions{ShardCount: shards})
	if err != nil || !vr.OK() || len(vr.Shards) != 2 || vr.Shards[0].Segments != len(segs2) || vr.Shards[0].Through != 3200 {
		t.Fatalf("verify of a healthy bucket: %+v %v", vr, err)
	}

	// Damage one segment object at rest, with its original metadata.
	victim := segs2[len(segs2)/2].Key
	orig, meta, err := v.b.Get(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(orig)
	flipped[len(flipped)/2] ^= 0x20
	damages := []struct {
		name string
		data []byte
	}{
		{"flipped byte", flipped},
		{"truncated", orig[:len(orig)-7]},
	}
	for _, d := range damages {
		if err := v.emu.PutRaw(bucketName, victim, d.data, meta.Encode()); err != nil {
			t.Fatal(err)
		}
		dst := t.TempDir()
		_, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: v.b, Dir: dst})
		if !errors.Is(err, blobtier.ErrCorrupt) || !strings.Contains(err.Error(), victim) || bucketlog.Class(err) != bucketlog.ClassStorage {
			t.Fatalf("%s: restore = %v, want a corruption naming %s", d.name, err, victim)
		}
		// Nothing half-restored is left looking like a store.
		if entries, err := os.ReadDir(localseg.ShardDir(dst, 0)); err == nil && len(entries) > 0 {
			t.Fatalf("%s: a failed restore left %d entries", d.name, len(entries))
		}
		vr, err := bucketlog.Verify(ctx, "", v.b, coldload.VerifyOptions{ShardCount: shards})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(vr.Problems, func(p coldload.Problem) bool {
			return p.Key == victim && p.Class == coldload.ProblemCorrupt
		}) || vr.OK() {
			t.Fatalf("%s: verify problems %+v do not name %s as corrupt", d.name, vr.Problems, victim)
		}
		t.Logf("%s: verify reported %d problem(s): %+v", d.name, len(vr.Problems), vr.Problems)
	}
	// Put the original back: verify is clean again and a restore by URL
	// returns everything.
	if err := v.emu.PutRaw(bucketName, victim, orig, meta.Encode()); err != nil {
		t.Fatal(err)
	}
	if vr, err := bucketlog.Verify(ctx, "", v.b, coldload.VerifyOptions{ShardCount: shards}); err != nil || !vr.OK() {
		t.Fatalf("verify after repair: %+v %v", vr.Problems, err)
	}
	// By URL where the URL alone reaches the emulator (s3; a gs:// URL
	// needs STORAGE_EMULATOR_HOST, which a parallel test cannot set:
	// TestBackgroundShipping opens both backends by URL).
	if _, needsEnv := v.emu.(interface{ Env() map[string]string }); !needsEnv {
		root3 := t.TempDir()
		rr3, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{BucketURL: v.emu.URL(bucketName), Dir: root3})
		if err != nil || rr3.LastSeq != 3200 {
			t.Fatalf("restore by URL %s: %+v %v", v.emu.URL(bucketName), rr3, err)
		}
		sameRecords(t, "restored by URL", readOnlyRecords(t, root3, 0, shards).Records, want)
	} else {
		root3, rr3 := restore(t, v.b, 0, bucketlog.RestoreOptions{})
		if rr3.LastSeq != 3200 {
			t.Fatalf("restore after repair: %+v", rr3)
		}
		sameRecords(t, "restored after repair", readOnlyRecords(t, root3, 0, shards).Records, want)
	}
	figures(t, start, "events=3200 sealed_segments=%d sealed_bytes=%d objects=%d restore_objects=%d restore_bytes=%d",
		nSealed, sealed, len(segs2), rr.Objects, rr.Bytes)
}
