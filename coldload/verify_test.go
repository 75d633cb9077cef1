package coldload_test

import (
	"context"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// A sound bucket verifies clean, every shard walked is named, and an absent
// shard is reported as absent rather than as a problem.
func TestVerifyCleanBucket(t *testing.T) {
	b, _ := memBucket(t)
	for shard := range uint32(2) {
		o := newOwner(t, b, shard, 2048)
		o.append(80)
		o.seal()
		o.publish()
		o.append(6)
		o.ship()
	}
	wc := &writeCounter{Bucket: b}
	rep, err := coldload.Verify(ctxT(t), wc, coldload.VerifyOptions{ShardCount: 3})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !rep.OK() {
		t.Fatalf("problems in a sound bucket: %+v", rep.Problems)
	}
	if len(rep.Shards) != 3 || !rep.Shards[0].Present || !rep.Shards[1].Present || rep.Shards[2].Present {
		t.Fatalf("shards %+v", rep.Shards)
	}
	for _, s := range rep.Shards[:2] {
		if s.Through != 86 || s.ShippedThrough != 86 || s.Segments == 0 || s.TailObjects == 0 {
			t.Fatalf("shard report %+v", s)
		}
	}
	if rep.Objects == 0 || rep.Bytes == 0 {
		t.Fatalf("report %+v", rep)
	}
	if n := wc.writes.Load(); n != 0 {
		t.Fatalf("verify made %d write requests", n)
	}
}

// Verify lists every problem, classified and naming the key, instead of
// stopping at the first.
func TestVerifyListsEveryProblem(t *testing.T) {
	b, raw := memBucket(t)
	// Shard 0: segments 1, 2, 4, 5 (3 missing), segment 5 flipped at rest.
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 3, plain)...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(4, 6, plain)...))
	put(t, b, blobtier.SegmentKey(0, 4), frames(t, evFrames(10, 12, plain)...))
	put(t, b, blobtier.SegmentKey(0, 5), frames(t, evFrames(13, 15, plain)...))
	rewriteAtRest(t, raw, blobtier.SegmentKey(0, 5), func(d []byte) []byte { d[20] ^= 1; return d })
	// A tail object that contradicts segment 2, and one that lies about
	// its range, both beyond... and a cursor that claims too much.
	other := func(seq uint64) string { return "other" }
	put(t, b, blobtier.TailKey(0, 5, 5), frames(t, evFrames(5, 5, other)...))
	put(t, b, blobtier.TailKey(0, 16, 18), frames(t, evFrames(16, 17, plain)...))
	putCursor(t, b, 0, tailbatch.Cursor{V: 1, ShippedThrough: 30, Consumers: map[string]uint64{"x": 31}})
	// Shard 1 is sound.
	put(t, b, blobtier.SegmentKey(1, 1), frames(t, evFrames(1, 3, plain)...))

	rep, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{Shards: []uint32{1, 0}})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	type pk struct{ class, key string }
	var got []pk
	for _, p := range rep.Problems {
		if p.Shard != 0 {
			t.Fatalf("problem in the sound shard: %+v", p)
		}
		got = append(got, pk{p.Class, p.Key})
	}
	want := []pk{
		{coldload.ProblemConflict, blobtier.TailKey(0, 5, 5)},
		{coldload.ProblemGap, blobtier.SegmentKey(0, 4)},
		{coldload.ProblemCorrupt, blobtier.SegmentKey(0, 5)},
		{coldload.ProblemCorrupt, blobtier.TailKey(0, 16, 18)},
		{coldload.ProblemCursor, blobtier.CursorKey(0)},
		{coldload.ProblemCursor, blobtier.CursorKey(0)},
	}
	cmp := func(a, b pk) int {
		if a.class != b.class {
			if a.class < b.class {
				return -1
			}
			return 1
		}
		if a.key < b.key {
			return -1
		}
		if a.key > b.key {
			return 1
		}
		return 0
	}
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("problems\n got %+v\nwant %+v\n(%+v)", got, want, rep.Problems)
	}
	if rep.Shards[0].Shard != 0 || rep.Shards[0].Through != 6 || rep.Shards[0].Problems != len(want) {
		t.Fatalf("shard 0 report %+v", rep.Shards[0])
	}
}

// A verify that cannot list fails as a whole instead of passing.
func TestVerifyFailsWhenItCannotRun(t *testing.T) {
	b, _ := memBucket(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := coldload.Verify(ctx, b, coldload.VerifyOptions{}); err == nil {
		t.Fatal("verify with a dead context succeeded")
	}
}
