package bucketlog

import (
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// The held cursor object's rebuild (after the damaged segments were put
// again) tombstones a consumer deleted while it was held: the damaged
// object carries no tombstone, the ConsumerDelete frame sits in the active
// segment (it never rides in a tail object), and the sealed segment the
// bucket holds has the consumer's ConsumerCreate after the object's
// shipped_through event, so a restore would replay it and bring the
// consumer back.
func TestRebuiltHeldCursorTombstonesAConsumerDeletedWhileHeld(t *testing.T) {
	ctx := ctxT(t)
	fs := newFaultShard(t, blobtier.Options{Timeout: time.Second})
	raw, fb, b, opts := fs.raw, fs.fb, fs.b, fs.opts
	opts.ShutdownShipTimeout = time.Second
	l := mustOpen(t, opts)
	appendEvents(t, ctx, l, 1, 20)
	// "gone" is created after event 20, the shipped position, in segment
	// 1, which ships sealed.
	if _, err := l.Pull(ctx, "gone", 10); err != nil {
		t.Fatal(err)
	}
	shipThrough(t, ctx, l, true, 20)
	closeOK(t, l)
	damageAtRest(t, raw, blobtier.SegmentKey(0, 1))
	damageAtRest(t, raw, blobtier.CursorKey(0))

	// The start holds the damaged cursor object until segment 1 is put
	// again; "gone" is deleted meanwhile, then a ship pass puts segment 1
	// and rebuilds the object. Every later cursor object write fails, so
	// the rebuild is what the bucket keeps.
	l = mustOpen(t, opts)
	defer l.Close()
	if err := l.DeleteConsumer(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.cur.*", Skip: 1})
	_, _ = l.Ship(ctx, false)
	c := cursorObject(t, ctx, b)
	if len(c.Consumers) != 0 {
		t.Fatalf("the rebuilt cursor object lists %v", c.Consumers)
	}
	dst := t.TempDir()
	if _, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst}); err != nil {
		t.Fatal(err)
	}
	if got := restoredConsumers(t, dst); len(got) != 0 {
		t.Fatalf("a restore after the held cursor object's rebuild brought back a consumer deleted while it was held: %v (tombstones %v)", got, c.Deleted)
	}
}
