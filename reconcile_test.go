package bucketlog

import (
	"errors"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// Issue 12 finding 2: at start, a segment is durable only when its object
// reads back intact. A put that landed damaged bytes under our metadata,
// then a failed read-back, then a restart: the segment must be uploaded
// again (not counted durable, whose tail cleanup would delete the only
// good copies in the bucket), so a restore from the bucket alone has every
// event.
func TestDamagedSegmentFoundAtStartIsUploadedAgain(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	defer b.Close()
	dir := t.TempDir()
	opts := Options{Dir: dir, Bucket: b, NoBackground: true}
	l := mustOpen(t, opts)
	for i := 1; i <= 10; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := l.Ship(ctx, false); err != nil || rep.ShippedThrough != 10 {
		t.Fatalf("ship the tail: %+v %v", rep, err)
	}
	key := blobtier.SegmentKey(0, 1)
	corrupt := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Corrupt, Key: key, Times: 1})
	refuse := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: key})
	if _, err := l.Ship(ctx, true); err == nil {
		t.Fatal("the upload's read-back was refused, yet the ship succeeded")
	}
	l.Close() // its last shipment cannot read the object back either
	if fb.Fired(corrupt) != 1 {
		t.Fatalf("the damaging put fired %d times", fb.Fired(corrupt))
	}
	fb.Remove(refuse)
	if _, _, err := b.Get(ctx, key); !errors.Is(err, blobtier.ErrCorrupt) {
		t.Fatalf("setup: the segment object should be damaged: %v", err)
	}

	l = mustOpen(t, opts)
	if n := l.OpenReport().DurableSegments; n != 0 {
		t.Fatalf("a damaged object counted durable at start (%d durable segments)", n)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatalf("ship after the restart: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, key); err != nil {
		t.Fatalf("the segment was not uploaded again: %v", err)
	}
	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("restore from the bucket alone: %v", err)
	}
	if rep.LastSeq != 10 {
		t.Fatalf("restore: %+v", rep)
	}
}
