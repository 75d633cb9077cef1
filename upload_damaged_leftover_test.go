package bucketlog

import (
	"errors"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// A segment upload that landed cut short under our metadata, whose delete
// after the failed read-back was refused, is our own damaged object, not a
// second writer's: the next pass deletes it and uploads again (found by
// internal/sim, seed 552: tail-stalled, the shard stopped shipping for
// good).
func TestDamagedLeftoverUploadIsNotASecondWriter(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: time.Second})
	defer b.Close()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Logger: quiet()})
	defer l.Close()
	for i := 1; i <= 5; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	key := blobtier.SegmentKey(0, 1)
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Truncate, Key: key, Times: 1})
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpDelete, Kind: faultbucket.Refuse, Key: key, Code: gcerrors.Internal, Times: 1})
	if _, err := l.Ship(ctx, true); !errors.Is(err, blobtier.ErrCorrupt) {
		t.Fatalf("the damaged upload's read-back: %v", err)
	}
	for range 2 {
		_, err := l.Ship(ctx, false)
		if errors.Is(err, ErrSecondWriter) {
			t.Fatalf("our own damaged object taken for a second writer: %v", err)
		}
	}
	rep, err := l.Ship(ctx, false)
	if err != nil {
		t.Fatalf("ship after the faults: %+v %v", rep, err)
	}
	if ready, why := l.Health(); !ready {
		t.Fatalf("not ready after the faults: %s", why)
	}
	if _, _, err := b.Get(ctx, key); err != nil {
		t.Fatalf("segment 1 not uploaded again: %v", err)
	}
}
