package coldload_test

import (
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// lazyBucket holds three segments of ten events each; consumer c is
// created and acked at 10 after segment 1's last event.
func lazyBucket(t *testing.T, cur tailbatch.Cursor) (blobtier.Bucket, int64) {
	t.Helper()
	b, _ := memBucket(t)
	seg1 := append(evFrames(1, 10, plain), localseg.Frame{Kind: localseg.KindConsumerCreate, Consumer: "c"},
		localseg.Frame{Kind: localseg.KindAck, Consumer: "c", Seq: 10})
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, seg1...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(11, 20, plain)...))
	last := frames(t, evFrames(21, 30, plain)...)
	put(t, b, blobtier.SegmentKey(0, 3), last)
	putCursor(t, b, 0, cur)
	return b, int64(len(last))
}

// TestLazyHydrateKeepsOlderSegmentsRemote: with the cursor object at the
// tip, a lazy hydrate downloads only the newest segment, records the two
// older ones as remote, and the store opens at the right tip with the
// cursor object's consumers.
func TestLazyHydrateKeepsOlderSegmentsRemote(t *testing.T) {
	b, budget := lazyBucket(t, tailbatch.Cursor{V: 1, ShippedThrough: 30, Consumers: map[string]uint64{"c": 10}})
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: budget})
	if rep.Lazy == nil || rep.Lazy.FullBecause != "" || rep.Lazy.RemoteSegments != 2 || rep.Segments != 1 || rep.Lazy.FirstLocalSeq != 21 {
		t.Fatalf("lazy hydrate: %+v, lazy %+v", rep, rep.Lazy)
	}
	st := openRO(t, dir)
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Tip != 30 || snap.Consumers["c"] != 10 || !st.IsEvicted(1) || !st.IsEvicted(2) {
		t.Fatalf("the lazily hydrated store: tip %d, consumers %v", snap.Tip, snap.Consumers)
	}
}

// TestLazyHydrateFallsBackWhenShippedThroughIsRemote is a RED control: the
// cursor object's shipped_through (5) lies in a segment that would stay
// remote, so consumer frames after it (c created and acked at 10) would be
// lost with a lazy hydrate; it downloads everything instead, says why, and
// keeps c at 10.
func TestLazyHydrateFallsBackWhenShippedThroughIsRemote(t *testing.T) {
	b, budget := lazyBucket(t, tailbatch.Cursor{V: 1, ShippedThrough: 5, Consumers: map[string]uint64{}})
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: budget})
	if rep.Lazy == nil || rep.Lazy.FullBecause == "" || rep.Segments != 3 {
		t.Fatalf("a lazy hydrate with shipped_through in a remote segment: %+v, lazy %+v", rep, rep.Lazy)
	}
	t.Logf("full because: %s", rep.Lazy.FullBecause)
	snap, err := openRO(t, dir).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Consumers["c"] != 10 {
		t.Fatalf("consumers %v, want c at 10", snap.Consumers)
	}
}
