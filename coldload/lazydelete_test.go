package coldload_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// segSource serves segment objects of shard 0, epoch 0, from a bucket.
type segSource struct{ b blobtier.Bucket }

func (r segSource) FetchSegment(ctx context.Context, id uint64) ([]byte, uint64, error) {
	data, m, err := r.b.Get(ctx, blobtier.SegmentKey(0, id))
	return data, m.XXH64, err
}

// TestLazyHydrateKeepsADeletedConsumerDeleted (sim seed 400528): consumer
// d is created and acked in segment 1, which a lazy hydrate leaves
// remote; its owner deleted it later, as the last frame (carried by no
// tail object), and the cursor object no longer names it (its tombstone
// was dropped once shipped_through passed it: docs/FORMAT.md §6.6). Every replay that rebuilds the consumers from the segments
// (the full index a per-execution read builds, an open without the
// checkpoint) must agree with the imported checkpoint: d stays deleted.
func TestLazyHydrateKeepsADeletedConsumerDeleted(t *testing.T) {
	b, _ := memBucket(t)
	seg1 := append(evFrames(1, 10, plain), localseg.Frame{Kind: localseg.KindConsumerCreate, Consumer: "d"},
		localseg.Frame{Kind: localseg.KindAck, Consumer: "d", Seq: 10},
		localseg.Frame{Kind: localseg.KindConsumerCreate, Consumer: "c"},
		localseg.Frame{Kind: localseg.KindAck, Consumer: "c", Seq: 9})
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, seg1...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(11, 20, plain)...))
	last := frames(t, evFrames(21, 30, plain)...)
	put(t, b, blobtier.SegmentKey(0, 3), last)
	putCursor(t, b, 0, tailbatch.Cursor{V: 1, ShippedThrough: 30, Consumers: map[string]uint64{"c": 9}})
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: int64(len(last))})
	if rep.Lazy == nil || rep.Lazy.FullBecause != "" || rep.Lazy.RemoteSegments != 2 {
		t.Fatalf("lazy hydrate: %+v, lazy %+v", rep, rep.Lazy)
	}
	check := func(name string, st *localseg.Store) {
		t.Helper()
		if _, err := st.ReadExecution("none", 0, 10); err != nil {
			t.Fatalf("%s: a per-execution read: %v", name, err)
		}
		snap, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := snap.Consumers["d"]; ok || snap.Consumers["c"] != 9 || len(snap.Consumers) != 1 || snap.Tip != 30 {
			t.Fatalf("%s: tip %d, consumers %v; want 30 and only c at 9", name, snap.Tip, snap.Consumers)
		}
	}
	open := func() *localseg.Store {
		st, err := localseg.Open(dir, localseg.Options{ReadOnly: true, Remote: segSource{b}})
		if err != nil {
			t.Fatalf("open %s: %v", dir, err)
		}
		return st
	}
	st := open()
	check("the lazily hydrated store", st)
	st.Close()
	if err := os.Remove(filepath.Join(dir, "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	st = open()
	check("an open without the checkpoint", st)
	st.Close()
	// An owner's open learns the unknown firsts and rewrites evicted.json:
	// the mark must survive it.
	ow, err := localseg.Open(dir, localseg.Options{Remote: segSource{b}, ResolveFirsts: true})
	if err != nil {
		t.Fatalf("an owner's open: %v", err)
	}
	check("an owner's open", ow)
	if err := ow.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	st = open()
	defer st.Close()
	check("an open without the checkpoint after the firsts are resolved", st)
}
