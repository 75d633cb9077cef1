package bucketlog

import (
	"context"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/tailbatch"
)

func cursorObject(t *testing.T, ctx context.Context, b blobtier.Bucket) tailbatch.Cursor {
	t.Helper()
	data, _, err := b.Get(ctx, blobtier.CursorKey(0))
	if err != nil {
		t.Fatal(err)
	}
	c, err := tailbatch.DecodeCursor(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// After a restart the owner compares its consumers with what the bucket's
// cursor object holds, not with nothing and not with its own disk: a
// consumer deleted before the next event leaves the object (found by
// internal/sim, seed 188: the consumer came back in a later hydrate), and
// one whose cursor write failed before the restart enters it.
func TestCursorObjectAfterRestartFollowsConsumers(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: time.Second})
	defer b.Close()
	dir := t.TempDir()
	o := Options{Dir: dir, Bucket: b, NoBackground: true, ShutdownShipTimeout: time.Second, Logger: quiet()}
	l := mustOpen(t, o)
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Pull(ctx, "gone", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	// "late" is created, and the cursor write of the last shipment fails.
	if _, err := l.Pull(ctx, "late", 10); err != nil {
		t.Fatal(err)
	}
	id := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.cur.*", Code: gcerrors.Internal})
	_ = l.Close()
	fb.Remove(id)

	l = mustOpen(t, o)
	defer l.Close()
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if c := cursorObject(t, ctx, b); len(c.Consumers) != 2 {
		t.Fatalf("after the first pass the cursor object holds %v, want gone and late", c.Consumers)
	}
	if err := l.DeleteConsumer(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart, then the deletion's pass (no event since).
	l = mustOpen(t, o)
	if err := l.DeleteConsumer(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if c := cursorObject(t, ctx, b); len(c.Consumers) != 0 {
		t.Fatalf("the cursor object still holds %v after the pass that follows their deletion", c.Consumers)
	}
}
