package coldload_test

import (
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
)

// TestLineageGapSkippedWithoutSegmentAboveIt: the plain rule of
// docs/FORMAT.md §9.3: a segment object inside a cut's gap is a fenced
// writer's and is skipped whatever its epoch, also while no segment at or
// above the cut's start_segment exists yet (the new owner continues at its
// start segment, so it never writes there). The restore keeps the bucket's
// id of the segment below the gap and records the gap as a jump.
func TestLineageGapSkippedWithoutSegmentAboveIt(t *testing.T) {
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	cut := fencing.NewStartRecord(1, 0, 5, 1, 0)
	putCut(t, b, 0, cut)
	// In the gap, under the new epoch: not the new owner's (it writes at
	// start_segment and above).
	putE(t, b, blobtier.SegmentKey(0, cut.FenceSegment), frames(t, evFrames(6, 8, zombiePayload)...), 1)
	putE(t, b, blobtier.TailKey(0, 6, 8), frames(t, evFrames(6, 8, ownerPayload)...), 1)
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	wantHistory(t, payloads(t, dir), 8, func(s uint64) string {
		if s > 5 {
			return ownerPayload(s)
		}
		return plain(s)
	})
	if rep.ZombieObjects != 1 {
		t.Fatalf("zombie objects %d, want 1 (the segment in the gap)", rep.ZombieObjects)
	}
	if ids := segmentFiles(t, dir); !slices.Equal(ids, []uint64{1, cut.FenceSegment + 1}) || rep.NextSegment != cut.FenceSegment+1 {
		t.Fatalf("segment files %v, next %d", ids, rep.NextSegment)
	}
	if st := openRW(t, dir); st.Tip() != 8 {
		t.Fatalf("reopened tip %d", st.Tip())
	}
	vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
	if err != nil || !vr.OK() || vr.Shards[0].Through != 8 || vr.Shards[0].ZombieObjects != 1 {
		t.Fatalf("verify: %v %+v %+v", err, vr.Problems, vr.Shards)
	}
}
