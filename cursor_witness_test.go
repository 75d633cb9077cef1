package bucketlog

import (
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// The cursor object's shipped_through is a restore's witness of the
// watermark (docs/FORMAT.md §9.1): once GC reclaims every segment below
// the watermark and cleanup deletes the tails, the cursor may be the only
// object that says the reclaimed sequences existed. So the watermark never
// passes the cursor object's shipped_through.

// TestTickWritesTheCursorWhenSegmentsBecomeDurable: a tick that finds the
// durable segments ahead of the cursor object's position writes it, even
// within the cursor interval (else a GC right after it would reclaim past
// the object's shipped_through).
func TestTickWritesTheCursorWhenSegmentsBecomeDurable(t *testing.T) {
	shared := casBucket(t)
	v := newView(shared)
	clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	o := fenceOpts(t.TempDir(), v, false)
	o.Now, o.TailInterval, o.SegmentMaxBytes = clock.Now, 15*time.Second, 2048
	l := mustOpen(t, o)
	defer l.Close()
	if _, err := l.Append(ctxT(t), ev("w", 1)); err != nil {
		t.Fatal(err)
	}
	clock.add(o.TailInterval)
	if _, err := l.Tick(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 40; i++ { // several sealed segments
		if _, err := l.Append(ctxT(t), ev("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	clock.add(o.TailInterval)
	if _, err := l.Tick(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got := cursorShipped(t, shared); got != 40 {
		t.Fatalf("segments became durable in this tick, but the cursor object says %d (held for the interval)", got)
	}
}

// TestGCNeverPassesTheCursorObject: the cursor object's write fails while
// the segments upload and the tail ships; a GC then must not move the
// watermark past the object's shipped_through, so a restore from the
// bucket alone still opens (without --allow-watermark-ahead).
func TestGCNeverPassesTheCursorObject(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memcas.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 2048, Logger: quiet()})
	defer l.Close()
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, ev("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal, Key: blobtier.CursorKey(0)})
	for i := 4; i <= 60; i++ {
		if _, err := l.Append(ctx, ev("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Ship(ctx, true) // segments and tail go; the cursor object stays at 3
	if l.ShippedThrough() != 60 {
		t.Fatalf("shipped %d", l.ShippedThrough())
	}
	if _, err := l.GC(ctx, GCRequest{MaxRetainedSegments: 1, MinRetainedSegments: 1}); err != nil {
		t.Fatal(err)
	}
	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("restore after a GC with the cursor object behind: %v", err)
	}
	if rep.LastSeq != 60 {
		t.Fatalf("restore: %+v", rep)
	}
}
