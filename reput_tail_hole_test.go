package bucketlog

import (
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/watermark"
)

// TestDamagedTailReputHoleIsNotAReclaim is the tail's side of
// TestDamagedSegmentReputHoleIsNotAReclaim: a tail object of ours that
// reads back damaged is deleted to be put again, and when that put fails
// the bucket must still hold its events. Here segment 2 (6..10) never
// uploads, the tail object 6..10 held its events, GC reclaimed segment 1
// (1..5) and the tail object 11..12 is retained above; with the delete
// first (found while fixing seed 5000688), a damaged watermark at the next
// start was repaired at 10 and the store reclaimed 6..10, which only the
// local disk held. Open: putting the events under other keys before the
// delete (a bridge of two cut batches, or one extended batch) closed this
// case, but the extra objects under damaging-write faults left more than
// one damaged tail object, which restore cannot pass over (sim seeds
// 7004673, 7006794, 7010446, 7013036); RELIABILITY.md.
func TestDamagedTailReputHoleIsNotAReclaim(t *testing.T) {
	t.Skip("open: a damaged tail object of ours is deleted before its events are in another object (RELIABILITY.md)")
	ctx := ctxT(t)
	raw := memcas.New(time.Now)
	fb := faultbucket.NewDriver(raw, 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	opts := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Logger: quiet()}
	l := mustOpen(t, opts)
	appendEvents(t, ctx, l, 1, 5)
	shipThrough(t, ctx, l, true, 5)
	if _, err := l.Pull(ctx, "c", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "c", 5); err != nil {
		t.Fatal(err)
	}
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.seg.*"})
	appendEvents(t, ctx, l, 6, 10)
	l.Ship(ctx, false) // tail object 6..10
	l.Ship(ctx, true)  // segment 2 sealed; its upload refused
	appendEvents(t, ctx, l, 11, 12)
	l.Ship(ctx, false) // tail object 11..12
	if rep, err := l.GC(ctx, GCRequest{}); err != nil || rep.Outcome != "reclaimed" {
		t.Fatalf("setup: GC %+v %v", rep, err)
	}
	l.Close()

	// The tail object 6..10 damaged at rest (and the cursor object, so the
	// start reads it back); its put again after the delete is refused.
	tail := blobtier.TailKey(0, 6, 10)
	truncateAtRest(t, raw, tail)
	truncateAtRest(t, raw, blobtier.CursorKey(0))
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: tail, Skip: 1})
	l = mustOpen(t, opts)
	l.Ship(ctx, false)
	l.Close()
	fb.Clear()

	truncateAtRest(t, raw, blobtier.WatermarkKey(0))
	l = mustOpen(t, opts)
	defer l.Close()
	wm, _, err := watermark.Read(ctx, b, 0)
	page, perr := l.Scan(ctx, 0, 100)
	if err != nil || wm.Seq != 5 || perr != nil || page.Base != 6 || len(page.Records) != 7 {
		t.Fatalf("repaired watermark %+v (%v); the log serves %d records from base %d (%v), want 6..12", wm, err, len(page.Records), page.Base, perr)
	}
}
