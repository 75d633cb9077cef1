package coldload_test

import (
	"testing"

	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
)

// A damaged tail object that overlaps a segment object is the tail
// phase's to judge (doc.go: Hydrate passes over a damaged tail object
// whose events intact objects hold): the segment's comparison with the
// tail objects it overlaps must not fail the hydrate on it. Verify still
// reports it. (A hydrated store's owner ships a range again from its own
// segments, so such a damaged object stays next to its replacements:
// TestDamagedTailObjectSpanningHydratedSegments in the root package.)
func TestDamagedTailOverlappingASegment(t *testing.T) {
	b, raw := memBucket(t)
	o := newOwner(t, b, 0, 1<<20)
	o.append(5)
	o.ship() // tail 1..5
	o.append(2)
	o.seal()
	o.publish() // segment 1: 1..7
	want := o.records()
	key := blobtier.TailKey(0, 1, 5)
	rewriteAtRest(t, raw, key, func(d []byte) []byte { return d[:len(d)/2] })

	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	if rep.LastSeq != 7 {
		t.Fatalf("report %+v", rep)
	}
	sameRecords(t, allRecords(t, openRO(t, dir)), want)

	vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range vr.Problems {
		found = found || p.Key == key && p.Class == coldload.ProblemCorrupt
	}
	if !found {
		t.Fatalf("verify does not report the damaged tail object: %+v", vr.Problems)
	}
}

// Only a damaged tail object is left to the tail phase: one the segment's
// comparison could not read for another reason (a refused request) fails
// the hydrate, which never passes over a conflict it did not see (the tail
// object below is superseded by the segment, so the tail phase never
// reads it).
func TestUnreadTailOverlappingASegmentIsNoPass(t *testing.T) {
	raw := memblob.OpenBucket(nil)
	fb := faultbucket.New(raw, 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	other := func(seq uint64) string {
		if seq == 5 {
			return "written by someone else"
		}
		return plain(seq)
	}
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 6, plain)...))
	put(t, b, blobtier.TailKey(0, 5, 5), frames(t, evFrames(5, 5, other)...))
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: blobtier.TailKey(0, 5, 5), Times: 1, Code: gcerrors.Internal})
	dir := target(t, 0)
	if _, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{}); err == nil {
		t.Fatal("the hydrate passed over a conflicting tail object whose read was refused")
	}
	absentOrEmpty(t, dir)
}
