package bucketlog

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// The tail-object analogue of TestRebuiltCursorWaitsForTheDamagedSegmentsPut:
// a damaged cursor object is not rebuilt over a tail object of ours that
// reads back damaged until its events were shipped again. The rebuild at
// start counts the damaged tail object (so as not to lower
// shipped_through); if it wrote that at once and the process stopped
// before the tick shipped the events again, the next start would trust
// the rebuilt shipped_through, skip the damaged object's read-back (a
// newer intact one is compared instead) and count its events as shipped:
// nothing ships them again, and a restore fails on them although the
// local disk holds them.
func TestRebuiltCursorWaitsForTheDamagedTailsShipment(t *testing.T) {
	ctx := ctxT(t)
	fs := newFaultShard(t, blobtier.Options{})
	raw, fb, b, opts := fs.raw, fs.fb, fs.b, fs.opts
	l := mustOpen(t, opts)
	// Two tail objects in the active segment: 1..10 and 11..15.
	appendEvents(t, ctx, l, 1, 10)
	shipThrough(t, ctx, l, false, 10)
	appendEvents(t, ctx, l, 11, 15)
	shipThrough(t, ctx, l, false, 15)
	closeOK(t, l)
	damageAtRest(t, raw, blobtier.TailKey(0, 1, 10))
	damageAtRest(t, raw, blobtier.CursorKey(0))

	// A start that finds both, then a bucket that refuses every tail put
	// until the process is gone: the events 1..10 are not shipped again.
	l = mustOpen(t, opts)
	refuse := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*"})
	if _, err := l.Ship(ctx, false); err == nil {
		t.Fatal("a ship pass succeeded although every tail put is refused")
	}
	if c, _, err := tailbatch.ReadCursor(ctx, b, 0); err == nil && c.ShippedThrough >= 1 {
		t.Fatalf("the cursor object vouches for sequences 1..%d while tail object 1..10 reads back damaged and its events were not shipped again", c.ShippedThrough)
	} else if err != nil && !errors.Is(err, blobtier.ErrCorrupt) && !errors.Is(err, tailbatch.ErrBadCursor) {
		t.Fatal(err)
	}
	if err := l.Close(); err == nil {
		t.Fatal("Close's last shipment succeeded although every tail put is refused")
	}
	fb.Remove(refuse)

	// The next start must find the damaged object again and its first
	// ship pass ship 1..10 again; the rebuild then counts 15.
	l = mustOpen(t, opts)
	defer l.Close()
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	c, _, err := tailbatch.ReadCursor(ctx, b, 0)
	if err != nil {
		t.Fatalf("the cursor object was not rebuilt once the damaged tail's events were shipped again: %v", err)
	}
	if c.ShippedThrough < 15 {
		t.Fatalf("the rebuilt cursor object moved shipped_through from 15 to %d", c.ShippedThrough)
	}
	if rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()}); err != nil || rep.LastSeq != 15 {
		t.Fatalf("restore after the ship pass: %+v, %v", rep, err)
	}
}
