package tailbatch_test

import (
	"context"
	"errors"
	"iter"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// putTail creates an object under the tail key of first..last of shard. Its
// bytes do not matter: RebuildCursor goes by keys alone.
func putTail(t *testing.T, ctx context.Context, b blobtier.Bucket, shard uint32, first, last uint64) {
	t.Helper()
	if err := b.PutIfAbsent(ctx, blobtier.TailKey(shard, first, last), []byte("decoy bytes"), 0); err != nil {
		t.Fatalf("put decoy %d..%d: %v", first, last, err)
	}
}

// The contiguous rule: segments and tail objects extend the cursor from the
// base only while they leave no gap; overlaps are fine; empty segments cover
// nothing.
func TestRebuildCursorContiguity(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		base  uint64
		segs  []tailbatch.SegRange
		tails [][2]uint64
		want  uint64
	}{
		{name: "empty bucket", want: 0},
		{name: "empty bucket above a base", base: 40, want: 40},
		{name: "tails only", tails: [][2]uint64{{1, 5}, {6, 9}}, want: 9},
		{name: "gap stops the walk", tails: [][2]uint64{{1, 5}, {9, 12}}, want: 5},
		{name: "first object above base+1", base: 3, tails: [][2]uint64{{5, 9}}, want: 3},
		{name: "segments then tail", segs: []tailbatch.SegRange{{1, 10}, {11, 20}}, tails: [][2]uint64{{21, 25}}, want: 25},
		{name: "tail overlaps a later segment", segs: []tailbatch.SegRange{{1, 10}, {11, 20}}, tails: [][2]uint64{{8, 14}, {15, 22}}, want: 22},
		{name: "retry overlap", tails: [][2]uint64{{1, 3}, {1, 6}, {4, 6}, {7, 7}}, want: 7},
		{name: "middle segment not durable", segs: []tailbatch.SegRange{{1, 10}, {21, 30}}, tails: [][2]uint64{{31, 35}}, want: 10},
		{name: "empty segment covers nothing", segs: []tailbatch.SegRange{{1, 10}, {11, 10}, {11, 12}}, want: 12},
		{name: "objects below the base", base: 50, segs: []tailbatch.SegRange{{1, 10}}, tails: [][2]uint64{{20, 49}, {51, 60}}, want: 60},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newMemBucket(t)
			for _, tl := range tc.tails {
				putTail(t, ctx, b, 2, tl[0], tl[1])
			}
			got, err := rebuildCursor(ctx, b, 2, tc.base, tc.segs)
			if err != nil || got != tc.want {
				t.Fatalf("RebuildCursor = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// CHECKLIST §4.8: objects under another shard's or another prefix's keys are
// never read when a shard rebuilds its cursor: decoys that would extend the
// coverage change nothing, and no object is fetched at all.
func TestRebuildCursorIgnoresOtherShardsAndPrefixes(t *testing.T) {
	ctx := context.Background()
	// Three views of one directory-backed bucket (PrefixedBucket closes the
	// bucket it wraps, so each view opens its own).
	dir := t.TempDir()
	view := func(prefix string) blobtier.Bucket {
		fb, err := fileblob.OpenBucket(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if prefix == "" {
			return newBlobBucket(t, fb)
		}
		return newBlobBucket(t, blob.PrefixedBucket(fb, prefix))
	}
	mine := newTestBucket(view("logs/"))
	otherPrefix := view("other/")
	root := view("")

	putTail(t, ctx, mine, 0, 1, 4)
	// Decoys: the continuation 5..100 under shard 1, under another prefix,
	// and at the bucket root.
	putTail(t, ctx, mine, 1, 5, 100)
	putTail(t, ctx, otherPrefix, 0, 5, 100)
	putTail(t, ctx, root, 0, 5, 100)

	got, err := rebuildCursor(ctx, mine, 0, 0, nil)
	if err != nil || got != 4 {
		t.Fatalf("RebuildCursor = %d, %v; want 4 (decoys ignored)", got, err)
	}
	if n := mine.count(opGet) + mine.count(opGetVersioned) + mine.count(opStat); n != 0 {
		t.Fatalf("RebuildCursor read %d objects; it needs keys only", n)
	}
	// The decoy shard sees only its own object.
	if got, err := rebuildCursor(ctx, mine, 1, 4, nil); err != nil || got != 100 {
		t.Fatalf("shard 1: RebuildCursor = %d, %v; want 100", got, err)
	}
}

// foreignLister returns what a misbehaving listing might: another shard's
// key, an unparsed key, a segment key and an empty object. None may count.
type foreignLister struct{ infos []blobtier.ObjectInfo }

func (f foreignLister) List(context.Context, uint32, blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	return func(yield func(blobtier.ObjectInfo, error) bool) {
		for _, i := range f.infos {
			if !yield(i, nil) {
				return
			}
		}
	}
}

func TestRebuildCursorTrustsOnlyItsOwnTailKeys(t *testing.T) {
	ctx := context.Background()
	l := foreignLister{infos: []blobtier.ObjectInfo{
		{Key: "t1", Size: 10, Parsed: blobtier.Key{Kind: blobtier.KindTail, Shard: 7, FirstSeq: 1, LastSeq: 3}},
		{Key: "other-shard", Size: 10, Parsed: blobtier.Key{Kind: blobtier.KindTail, Shard: 8, FirstSeq: 4, LastSeq: 50}},
		{Key: "unparsed", Size: 10, Parsed: blobtier.Key{Kind: blobtier.KindTail, Shard: 7, FirstSeq: 4, LastSeq: 50}, ParseErr: blobtier.ErrBadKey},
		{Key: "segment", Size: 10, Parsed: blobtier.Key{Kind: blobtier.KindSegment, Shard: 7, Segment: 4}},
		{Key: "empty", Size: 0, Parsed: blobtier.Key{Kind: blobtier.KindTail, Shard: 7, FirstSeq: 4, LastSeq: 50}},
		{Key: "reversed", Size: 10, Parsed: blobtier.Key{Kind: blobtier.KindTail, Shard: 7, FirstSeq: 40, LastSeq: 4}},
	}}
	got, err := rebuildCursor(ctx, l, 7, 0, nil)
	if err != nil || got != 3 {
		t.Fatalf("RebuildCursor = %d, %v; want 3", got, err)
	}
}

// A listing error is an error, never a silent fallback.
func TestRebuildCursorListError(t *testing.T) {
	ctx := context.Background()
	b := newTestBucket(newMemBucket(t))
	b.setBefore(refuseAll)
	if _, err := rebuildCursor(ctx, b, 0, 0, nil); !errors.Is(err, errRefused) {
		t.Fatalf("RebuildCursor against a refusing bucket: %v", err)
	}
}

// CHECKLIST §4.11: after a crash the cursor is rebuilt from the bucket, so
// events acknowledged just before the crash ship on the next pass. RED: with
// the cursor reset to the local tip they would not ship until the segment
// seals (the pass finds nothing, and exactly those events are missing from
// the bucket).
func TestRebuiltCursorShipsEventsAckedBeforeTheCrash(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"rebuild", "RED-local-tip"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			b := newMemBucket(t)
			opts := localseg.Options{SegmentMaxBytes: 4 << 10}

			s, err := localseg.Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := tailbatch.New(0, 0, tailbatch.Options{})
			appendN(t, s, 60)
			if _, err := r.Replicate(ctx, s, b); err != nil {
				t.Fatal(err)
			}
			durable := uploadSealed(t, ctx, s, b, 0)
			shipped := r.ShippedThrough()
			acked := appendN(t, s, 7) // acknowledged, then the process dies before the tick
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			s2 := openStoreIn(t, dir, opts)
			if s2.Tip() != acked {
				t.Fatalf("reopened tip %d, want %d", s2.Tip(), acked)
			}
			var start uint64
			if mode == "rebuild" {
				start, err = rebuildCursor(ctx, b, 0, 0, durable)
				if err != nil {
					t.Fatal(err)
				}
				if start != shipped {
					t.Fatalf("rebuilt cursor %d, want %d", start, shipped)
				}
			} else {
				start = s2.Tip()
			}
			r2 := tailbatch.New(0, start, tailbatch.Options{})
			res, err := r2.Replicate(ctx, s2, b)
			if err != nil {
				t.Fatal(err)
			}
			m := missing(bucketEvents(t, ctx, b, 0), acked)
			if mode == "rebuild" {
				if len(m) != 0 || res.Records != acked-shipped {
					t.Fatalf("after the rebuilt pass: shipped %d records, bucket misses %v", res.Records, m)
				}
				return
			}
			if res.Prepared != 0 || uint64(len(m)) != acked-shipped || m[0] != shipped+1 {
				t.Fatalf("RED: pass prepared %d; bucket misses %v; want exactly %d..%d missing", res.Prepared, m, shipped+1, acked)
			}
		})
	}
}
