package bucketlog

import (
	"context"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/watermark"
)

// The owner replaces its own segment object damaged at rest by deleting it
// and putting it again (write-once keys are never overwritten). When that
// put fails, the bucket lacks the segment's key until a later pass. A
// damaged watermark met at the next start must not read the hole as a
// reclaim: its repair takes every sequence below the lowest one the bucket
// retains for reclaimed, and the store that adopts the repaired mark
// reclaims events only the local disk holds (simulation seed 5000688: an
// older copy of the disk met the hole and dropped events 1–6, which were
// never reclaimed). The owner deletes its damaged object once tail objects
// hold the segment's events (docs/FORMAT.md §7.1 step 5), so the bucket
// never lacks a key for an event it held and did not reclaim.
//
// replication_off: the put again fails, and no tail pass ships the
// segment's events after the delete, so only the tail objects put before
// it hold them. tails_refused: the tail puts fail, so the object is
// replaced without them (left damaged, a later start whose tail listing
// hid their copies could count it durable: sim seed 6021762); its put
// again lands, and nothing is lost. (Both failing at once — the tail puts
// and the put again — still leaves the hole until a later pass puts it:
// RELIABILITY.md.)
func TestDamagedSegmentReputHoleIsNotAReclaim(t *testing.T) {
	t.Run("tails_refused", func(t *testing.T) { reputHole(t, false) })
	t.Run("replication_off", func(t *testing.T) { reputHole(t, true) })
}

func reputHole(t *testing.T, replicationOff bool) {
	ctx := ctxT(t)
	raw := memcas.New(time.Now)
	fb := faultbucket.NewDriver(raw, 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	opts := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, DisableTailReplication: replicationOff, Logger: quiet()}
	l := mustOpen(t, opts)
	for i := 1; i <= 10; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
		if i == 5 || i == 10 {
			if _, err := l.Ship(ctx, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, err := l.Store().Snapshot()
	if err != nil || len(snap.Segments) < 2 || snap.Segments[0].LastSeq != 5 {
		t.Fatalf("setup: segments %+v %v", snap.Segments, err)
	}
	segKey := blobtier.SegmentKey(0, snap.Segments[0].ID)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if tails := raw.Keys(blobtier.ListPrefix(0, blobtier.KindTail)); len(tails) != 0 {
		t.Fatalf("setup: tail objects left %v", tails)
	}
	if _, ok := raw.Raw(blobtier.WatermarkKey(0)); !ok {
		t.Fatal("setup: no watermark object (durable_seq)")
	}

	// The first segment's object is damaged at rest, and the cursor object
	// too (without its shipped_through the start reads the segments back
	// and finds the damage). With replication off the owner's put of the
	// segment again fails; else its tail puts do.
	truncateAtRest(t, raw, segKey)
	truncateAtRest(t, raw, blobtier.CursorKey(0))
	if replicationOff {
		fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: segKey, Skip: 1})
	} else {
		fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*"})
	}
	l = mustOpen(t, opts)
	if _, err := l.Ship(ctx, false); (err == nil) == replicationOff {
		t.Fatalf("ship with the faults: %v (an error only when the segment's put again is refused)", err)
	}
	l.Close()
	fb.Clear()
	_, kept := raw.Raw(segKey)
	t.Logf("segment object kept: %v; tail objects: %v", kept, raw.Keys(blobtier.ListPrefix(0, blobtier.KindTail)))

	// A damaged watermark, then the next start: the repair must not take
	// events 1–5 for reclaimed.
	truncateAtRest(t, raw, blobtier.WatermarkKey(0))
	l = mustOpen(t, opts)
	defer l.Close()
	if wm, _, err := watermark.Read(ctx, b, 0); err != nil || wm.Seq != 0 || wm.Segment != 0 {
		t.Errorf("the repaired watermark is %+v (%v); nothing was ever reclaimed", wm, err)
	}
	page, err := l.Scan(ctx, 0, 100)
	if err != nil || len(page.Records) != 10 || page.Records[0].Seq != 1 {
		t.Fatalf("after the repair the log serves %d records from base %d (%v), want 1..10", len(page.Records), page.Base, err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatalf("ship after the faults: %v", err)
	}
	if _, _, err := b.Get(ctx, segKey); err != nil {
		t.Fatalf("the segment was not put again: %v", err)
	}
	if tails := raw.Keys(blobtier.ListPrefix(0, blobtier.KindTail)); len(tails) != 0 && replicationOff {
		t.Errorf("tail objects the segment covers were not cleaned up: %v", tails)
	}
	rep, err := Restore(context.Background(), RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if err != nil || rep.LastSeq != 10 || rep.Base != 0 || rep.FirstSeq != 1 {
		t.Fatalf("restore from the bucket alone: %+v, %v", rep, err)
	}
}

// truncateAtRest cuts key's bytes in half under its metadata (damage at rest).
func truncateAtRest(t *testing.T, raw *memcas.Bucket, key string) {
	t.Helper()
	data, ok := raw.Raw(key)
	if !ok || !raw.SetRaw(key, data[:len(data)/2]) {
		t.Fatalf("damage %s: absent", key)
	}
}
