package bucketlog

import (
	"testing"

	"github.com/bucketlog/bucketlog/blobtier/memcas"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// The cursor object is the watermark's witness once GC deleted the objects
// below it (docs/FORMAT.md §9.1). A restarted owner whose bucket cursor
// object lags what its durable segments cover (the cursor writes failed
// before the stop) must not reclaim past the object's shipped_through
// while it cannot rewrite it: it starts from what the object says, not
// from what the segments imply (seed 520505 of the simulation, a takeover
// in place of the restart). Without that the watermark passes its witness,
// and a restore from the bucket refuses it as a forged watermark.
func TestRestartedOwnerGCKeepsTheWatermarkWitnessed(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memcas.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	defer b.Close()
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true, SegmentMaxBytes: 2048, Logger: quiet()})
	appendShip := func(l *Log, from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if _, err := l.Append(ctx, ev("1", i)); err != nil {
				t.Fatal(err)
			}
		}
		l.Ship(ctx, false)
		l.Ship(ctx, true)
	}
	appendShip(l, 1, 4) // a segment, the cursor object at 4
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: blobtier.CursorKey(0)})
	appendShip(l, 5, 60) // segments; the cursor object stays at 4
	l.Close()

	l = mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true, SegmentMaxBytes: 2048, Logger: quiet()})
	// The uploads stall from here on: nothing above the watermark reaches
	// the bucket, so after the GC the cursor object is its only witness.
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.seg.*"})
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*"})
	for i := 61; i <= 90; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	grep, err := l.GC(ctx, GCRequest{MaxRetainedSegments: 1})
	t.Logf("gc: %+v %v", grep, err)
	l.Close()
	fb.Clear()

	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("restore after the restarted owner's GC: %v", err)
	}
	if rep.LastSeq != 60 {
		t.Fatalf("restore through %d, want 60", rep.LastSeq)
	}
}
