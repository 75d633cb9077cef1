package bucketlog

import (
	"testing"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// A consumer deleted just before a stop stays deleted in a restore, also
// when no cursor object write carried its tombstone before the stop and
// the cursor object is then found damaged: the store's record of recent
// deletes (the tombstones' source) was in memory only, so the rebuilt
// object named neither the consumer nor its deletion, and a restore
// replayed the ConsumerCreate that the bucket's sealed segment holds
// after the object's shipped_through event (the ConsumerDelete, the last
// frame of the active segment, never rides in a tail object).
func TestDeletedConsumerStaysDeletedAfterAStopAndACursorRebuild(t *testing.T) {
	ctx := ctxT(t)
	fs := newFaultShard(t, blobtier.Options{Timeout: time.Second})
	raw, fb, b, opts := fs.raw, fs.fb, fs.b, fs.opts
	opts.ShutdownShipTimeout = time.Second
	l := mustOpen(t, opts)
	appendEvents(t, ctx, l, 1, 5)
	// "gone" is created after event 5, in segment 1, which ships sealed.
	if _, err := l.Pull(ctx, "gone", 10); err != nil {
		t.Fatal(err)
	}
	shipThrough(t, ctx, l, true, 5)
	if got := cursorObject(t, ctx, b).Consumers; len(got) != 1 {
		t.Fatalf("setup: the cursor object lists %v, want gone", got)
	}
	// Deleted, then the process stops before a cursor object write.
	if err := l.DeleteConsumer(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	id := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.cur.*", Code: gcerrors.Internal})
	_ = l.Close()
	fb.Remove(id)
	damageAtRest(t, raw, blobtier.CursorKey(0))

	// Open rebuilds the cursor object: already that one must carry the
	// deletion, before any ship pass.
	l = mustOpen(t, opts)
	if c := cursorObject(t, ctx, b); len(c.Consumers) != 0 {
		t.Fatalf("the rebuilt cursor object lists %v", c.Consumers)
	}
	early := t.TempDir()
	if _, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: early}); err != nil {
		t.Fatal(err)
	}
	if got := restoredConsumers(t, early); len(got) != 0 {
		t.Fatalf("a restore after the cursor object's rebuild at start brought back a deleted consumer: %v", got)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	closeOK(t, l)
	dst := t.TempDir()
	if _, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst}); err != nil {
		t.Fatal(err)
	}
	if got := restoredConsumers(t, dst); len(got) != 0 {
		t.Fatalf("the restore brought back a deleted consumer: %v", got)
	}
}

// The same without any damage: a consumer created and deleted between two
// cursor object writes (the one that would have listed it failed), then a
// stop. The object never named it, so only the store's record of the
// delete could tombstone it, and that record did not outlive the process.
func TestDeletedConsumerNeverInTheCursorObjectStaysDeletedAfterAStop(t *testing.T) {
	ctx := ctxT(t)
	fs := newFaultShard(t, blobtier.Options{Timeout: time.Second})
	fb, b, opts := fs.fb, fs.b, fs.opts
	opts.ShutdownShipTimeout = time.Second
	l := mustOpen(t, opts)
	appendEvents(t, ctx, l, 1, 4)
	shipThrough(t, ctx, l, false, 4)
	appendEvents(t, ctx, l, 5, 5)
	// "gone" is created after event 5, in segment 1, which ships sealed;
	// the cursor object write of that pass fails, then it is deleted and
	// the process stops, its last cursor object write failing too.
	if _, err := l.Pull(ctx, "gone", 10); err != nil {
		t.Fatal(err)
	}
	id := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.cur.*", Code: gcerrors.Internal})
	_, _ = l.Ship(ctx, true)
	if err := l.DeleteConsumer(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	fb.Remove(id)
	if c := cursorObject(t, ctx, b); c.ShippedThrough != 4 || len(c.Consumers) != 0 {
		t.Fatalf("setup: the cursor object is %+v, want shipped_through 4 and no consumer", c)
	}

	l = mustOpen(t, opts)
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	closeOK(t, l)
	dst := t.TempDir()
	if _, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst}); err != nil {
		t.Fatal(err)
	}
	if got := restoredConsumers(t, dst); len(got) != 0 {
		t.Fatalf("the restore brought back a deleted consumer: %v", got)
	}
}
