package coldload_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// lazyFaultBucket is lazyBucket's history over a fault wrapper; segment 2
// opens with consumer frames before its first event (the head read must
// read past them).
func lazyFaultBucket(t *testing.T, seed uint64) (blobtier.Bucket, *faultbucket.Bucket, int64) {
	t.Helper()
	fb := faultbucket.New(memblob.OpenBucket(nil), seed)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 10, plain)...))
	seg2 := append([]localseg.Frame{{Kind: localseg.KindConsumerCreate, Consumer: "c"}, {Kind: localseg.KindAck, Consumer: "c", Seq: 10}},
		evFrames(11, 20, plain)...)
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, seg2...))
	last := frames(t, evFrames(21, 30, plain)...)
	put(t, b, blobtier.SegmentKey(0, 3), last)
	putCursor(t, b, 0, tailbatch.Cursor{V: 1, ShippedThrough: 30, Consumers: map[string]uint64{"c": 10}})
	return b, fb, int64(len(last))
}

// recordedFirsts reads the first events evicted.json records, by id.
func recordedFirsts(t *testing.T, dir string) map[uint64]uint64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "evicted.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Segments []struct{ ID, First uint64 }
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	out := map[uint64]uint64{}
	for _, s := range rec.Segments {
		out[s.ID] = s.First
	}
	return out
}

// fetchCounter is the owner's remote source, counting segment fetches.
type fetchCounter struct {
	b blobtier.Bucket
	n atomic.Int64
}

func (f *fetchCounter) FetchSegment(ctx context.Context, id uint64) ([]byte, uint64, error) {
	f.n.Add(1)
	data, m, err := f.b.Get(ctx, blobtier.SegmentKey(0, id))
	return data, m.XXH64, err
}

// ownerOpen opens dir as an owner resolving unknown firsts (with no
// transaction window, which would read the newest events from the remote
// segments too), checks every event 1..30 reads back, and returns how many
// segments it fetched at open.
func ownerOpen(t *testing.T, b blobtier.Bucket, dir string) int64 {
	t.Helper()
	src := &fetchCounter{b: b}
	st, err := localseg.Open(dir, localseg.Options{Remote: src, ResolveFirsts: true, TransactionWindow: -1})
	if err != nil {
		t.Fatalf("the owner's open: %v", err)
	}
	defer st.Close()
	atOpen := src.n.Load()
	p, err := st.Scan(0, 100)
	if err != nil || len(p.Records) != 30 {
		t.Fatalf("scan after the owner's open: %d records, %v", len(p.Records), err)
	}
	for i, r := range p.Records {
		if r.Seq != uint64(i+1) || r.Payload != plain(r.Seq) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	return atOpen
}

// TestLazyHydrateRecordsFirstsFromRangedReads: a lazy hydrate learns each
// remote segment's first event from a ranged read of its head (past the
// consumer frames segment 2 opens with) and records it, so the owner's
// open fetches no remote segment.
func TestLazyHydrateRecordsFirstsFromRangedReads(t *testing.T) {
	b, _, budget := lazyFaultBucket(t, 1)
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: budget})
	if rep.Lazy == nil || rep.Lazy.RemoteSegments != 2 || rep.Lazy.FirstsKnown != 2 || rep.Lazy.RangeReads != 2 {
		t.Fatalf("lazy hydrate: %+v", rep.Lazy)
	}
	if got := recordedFirsts(t, dir); got[1] != 1 || got[2] != 11 {
		t.Fatalf("evicted.json firsts %v, want 1: 1, 2: 11", got)
	}
	if n := ownerOpen(t, b, dir); n != 0 {
		t.Fatalf("the owner's open fetched %d remote segments, want 0", n)
	}
}

// TestLazyHydrateBadRangedReadLeavesFirstUnknown: a ranged read that is
// refused, truncated, extended or corrupted leaves that segment's first
// unknown (never a wrong one, never a failed hydrate), the other one is
// still learned, and the owner's open resolves the unknown one by a
// verified fetch as before and reads every event back. A flipped bit
// beyond the first event frame does not matter (the first is still
// right); over the seeds tried, some flip lands in it.
func TestLazyHydrateBadRangedReadLeavesFirstUnknown(t *testing.T) {
	for _, k := range []faultbucket.Kind{faultbucket.Refuse, faultbucket.Truncate, faultbucket.Extend, faultbucket.Corrupt} {
		t.Run(string(k), func(t *testing.T) {
			unknown := 0
			for seed := uint64(1); seed <= 24; seed++ {
				b, fb, budget := lazyFaultBucket(t, seed)
				id := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRangeRead, Kind: k, Key: blobtier.SegmentKey(0, 2), Times: 1})
				dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: budget})
				if fb.Fired(id) != 1 || rep.Lazy == nil || rep.Lazy.RemoteSegments != 2 {
					t.Fatalf("seed %d: fired %d; lazy hydrate: %+v", seed, fb.Fired(id), rep.Lazy)
				}
				got := recordedFirsts(t, dir)
				if got[1] != 1 || (got[2] != localseg.FirstUnknown && (k != faultbucket.Corrupt || got[2] != 11)) {
					t.Fatalf("seed %d: evicted.json firsts %v, want 1: 1, 2: unknown", seed, got)
				}
				want := int64(0)
				if got[2] == localseg.FirstUnknown {
					want = 1
					unknown++
				}
				if n := ownerOpen(t, b, dir); n != want || rep.Lazy.FirstsKnown != 2-int(want) {
					t.Fatalf("seed %d: the owner's open fetched %d remote segments, want %d (%d firsts known)", seed, n, want, rep.Lazy.FirstsKnown)
				}
				if got := recordedFirsts(t, dir); got[2] != 11 {
					t.Fatalf("seed %d: after the owner's open, evicted.json firsts %v, want 2: 11", seed, got)
				}
				if k != faultbucket.Corrupt {
					return
				}
			}
			if unknown == 0 {
				t.Fatal("no corrupted head left the first unknown")
			}
			t.Logf("%d of 24 corrupted heads hit the first event frame", unknown)
		})
	}
}

// TestLazyHydrateDropsFirstsOutOfOrder: the heads of segments 1 and 2 give
// firsts out of order (11, then 1: a bucket a full restore would refuse):
// neither is trusted, both stay unknown, the hydrate still succeeds, and
// the owner's open, fetching both, refuses them as corrupt, changing
// nothing.
func TestLazyHydrateDropsFirstsOutOfOrder(t *testing.T) {
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(11, 20, plain)...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(1, 10, plain)...))
	last := frames(t, evFrames(21, 30, plain)...)
	put(t, b, blobtier.SegmentKey(0, 3), last)
	putCursor(t, b, 0, tailbatch.Cursor{V: 1, ShippedThrough: 30, Consumers: map[string]uint64{}})
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Lazy: true, LocalBytes: int64(len(last))})
	if rep.Lazy == nil || rep.Lazy.RemoteSegments != 2 || rep.Lazy.FirstsKnown != 0 {
		t.Fatalf("lazy hydrate: %+v", rep.Lazy)
	}
	if got := recordedFirsts(t, dir); got[1] != localseg.FirstUnknown || got[2] != localseg.FirstUnknown {
		t.Fatalf("evicted.json firsts %v, want both unknown", got)
	}
	src := &fetchCounter{b: b}
	if st, err := localseg.Open(dir, localseg.Options{Remote: src, ResolveFirsts: true, TransactionWindow: -1}); err == nil {
		st.Close()
		t.Fatal("the owner's open accepted segments whose events run backwards")
	}
	if got := recordedFirsts(t, dir); got[1] != localseg.FirstUnknown || got[2] != localseg.FirstUnknown || src.n.Load() != 2 {
		t.Fatalf("after the refused open, evicted.json firsts %v (%d fetches)", got, src.n.Load())
	}
}
