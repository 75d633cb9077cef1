package bucketlog

import (
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
)

// A hydrated store lays its events out in segments of its own, so a tail
// object the previous owner shipped from one segment may span two local
// segments. Damaged at rest, it is still an object of ours (its metadata
// names the local bytes of its range): Open must not refuse it as a
// diverged history (simulation seed 113146: the shard could never open
// again), the next tick ships its events again, and a restore passes over
// it.
func TestDamagedTailObjectSpanningHydratedSegments(t *testing.T) {
	ctx := ctxT(t)
	key := blobtier.TailKey(0, 22, 24) // the newest tail object, which Open compares
	// hydrated ships 24 events in tail objects of 3 from one big segment,
	// loses the disk and hydrates into segments of size bytes; it reports
	// whether the newest tail object spans two hydrated segments.
	hydrated := func(size int64) (*blob.Bucket, blobtier.Bucket, Options, bool) {
		raw := memblob.OpenBucket(nil)
		b := blobtier.New(raw, blobtier.Options{})
		t.Cleanup(func() { b.Close() })
		l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 1 << 16})
		for i := 1; i <= 24; i++ {
			if _, err := l.Append(ctx, ev("1", i)); err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				if _, err := l.Ship(ctx, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		l.Close()
		small := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: size}
		l = mustOpen(t, small)
		defer l.Close()
		snap, err := l.Store().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var first, last uint64
		for _, s := range snap.Segments {
			if s.Events > 0 && s.FirstSeq <= 22 && 22 <= s.LastSeq {
				first = s.ID
			}
			if s.Events > 0 && s.FirstSeq <= 24 && 24 <= s.LastSeq {
				last = s.ID
			}
		}
		return raw, b, small, first != last
	}
	var (
		raw   *blob.Bucket
		b     blobtier.Bucket
		small Options
		ok    bool
	)
	for size := int64(500); !ok; size += 50 {
		if size > 3000 {
			t.Fatal("no segment size splits the newest tail object")
		}
		raw, b, small, ok = hydrated(size)
	}
	damageAtRest(t, raw, key)

	l, err := Open(ctx, small)
	if err != nil {
		t.Fatalf("Open with a damaged tail object of ours (%s) spanning two local segments: %v", key, err)
	}
	defer l.Close()
	if _, err := l.Ship(ctx, false); err != nil || l.ShippedThrough() != 24 {
		t.Fatalf("ship after the restart: shipped %d, %v", l.ShippedThrough(), err)
	}
	// A restore passes over the damaged object: the hydrated owner's
	// segment and its new tail object hold every event of it (the
	// comparison of a segment with the tail objects it overlaps must not
	// fail on it either).
	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if err != nil || rep.LastSeq != 24 {
		t.Fatalf("restore from the bucket alone: %+v, %v", rep, err)
	}
}
