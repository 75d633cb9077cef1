package bucketlog

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// Tests of the running shipper: a partly failed upload pass (issue 12,
// finding 4). Helpers here are shared with the other issue-12 test files.

// s3FaultBucket is an S3 emulator bucket (it can compare-and-swap, so shared
// GC runs) behind a fault-injecting driver.
func s3FaultBucket(t *testing.T) (*faultbucket.Bucket, blobtier.Bucket) {
	t.Helper()
	srv, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.CreateBucket("log"); err != nil {
		t.Fatal(err)
	}
	raw, err := srv.OpenBucket(ctxT(t), "log")
	if err != nil {
		t.Fatal(err)
	}
	fb := faultbucket.New(raw, 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	t.Cleanup(func() { b.Close() })
	if !b.CanCAS() {
		t.Fatal("the S3 emulator bucket cannot compare-and-swap")
	}
	return fb, b
}

// partlyUploaded builds the state of finding 4: sealed segments 1 and 2 are
// durable in the bucket, segment 3 cannot upload (the bucket refuses its
// key), the tail has shipped nothing (tail puts refused too), and a consumer
// has read everything. It returns the last sequence of segment 2.
func partlyUploaded(t *testing.T, l *Log, fb *faultbucket.Bucket) (seg2Last uint64, segRule, tailRule int) {
	t.Helper()
	ctx := ctxT(t)
	all := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal})
	// One batch, so a synchronous log waits once.
	evs := make([]localseg.Event, 80)
	for i := range evs {
		evs[i] = ev("4", i+1)
	}
	if _, err := l.AppendBatch(ctx, evs); err != nil && !errors.Is(err, ErrNotInBucket) {
		t.Fatalf("append: %v", err)
	}
	if _, err := l.store.Seal(); err != nil {
		t.Fatal(err)
	}
	snap, err := l.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The first writer's ids start at its cut's start segment (the
	// store's jump): segments 1, 2, 3 below are relative to it.
	first := snap.Segments[0].ID
	if len(snap.Segments) < 5 {
		t.Fatalf("want at least 4 sealed segments, have %+v", snap.Segments)
	}
	seg2Last = snap.Segments[1].LastSeq
	fb.Remove(all)
	segRule = fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: blobtier.SegmentKey(0, first+2)})
	tailRule = fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*"})
	if _, err := l.Ship(ctx, false); err == nil {
		t.Fatal("ship succeeded with segment 3 and the tail refused")
	}
	if !l.ship.IsDurable(first) || !l.ship.IsDurable(first+1) || l.ship.IsDurable(first+2) {
		t.Fatalf("durable: 1=%v 2=%v 3=%v", l.ship.IsDurable(first), l.ship.IsDurable(first+1), l.ship.IsDurable(first+2))
	}
	if _, err := l.Pull(ctx, "reader", 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "reader", l.store.Tip()); err != nil {
		t.Fatal(err)
	}
	return seg2Last, segRule, tailRule
}

// Finding 4, first half: a pass that fails at segment 3 still moves the
// shipped position over the segments it made durable.
func TestPartialUploadPassAdvancesShipped(t *testing.T) {
	fb, b := s3FaultBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 2048, Logger: quiet()})
	defer l.Close()
	seg2Last, _, _ := partlyUploaded(t, l, fb)
	if got := l.ShippedThrough(); got < seg2Last {
		t.Fatalf("shipped through %d after segments 1-2 became durable (they end at %d)", got, seg2Last)
	}
}

// Finding 4: one segment that cannot upload, a GC pass, then synchronous
// appends: the tail still ships and the appends are acknowledged.
func TestUnuploadableSegmentDoesNotStallTheTail(t *testing.T) {
	ctx := ctxT(t)
	fb, b := s3FaultBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 2048,
		SyncToBucket: true, SyncWait: 2 * time.Second, Logger: quiet()})
	defer l.Close()
	seg2Last, _, tailRule := partlyUploaded(t, l, fb)
	rep, err := l.GC(ctx, GCRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Base != seg2Last+1 {
		t.Fatalf("GC base %d, want %d (segments 1-2 reclaimed): %+v", rep.Base, seg2Last+1, rep)
	}
	fb.Remove(tailRule)
	for i := 81; i <= 85; i++ {
		if _, err := l.Append(ctx, ev("4", i)); err != nil {
			t.Fatalf("sync append %d with only segment 3 refused: %v (HTTP %d)", i, err, HTTPStatus(err))
		}
	}
	if got, tip := l.ShippedThrough(), l.store.Tip(); got != tip {
		t.Fatalf("shipped through %d, tip %d", got, tip)
	}
}

// Finding 4, second half: a shipped position below the reclaim base (a
// reclaimed range is in the bucket by construction) moves up to the base
// instead of failing every Prepare.
func TestTailShipsFromAboveTheReclaimBase(t *testing.T) {
	ctx := ctxT(t)
	fb, b := s3FaultBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 2048, Logger: quiet()})
	defer l.Close()
	seg2Last, _, tailRule := partlyUploaded(t, l, fb)
	if _, err := l.GC(ctx, GCRequest{}); err != nil {
		t.Fatal(err)
	}
	// A replicator that knows only an older position (as after a pass that
	// lost track): everything through the base is in the bucket anyway.
	l.ship.SetReplicatorForTest(tailbatch.New(0, seg2Last-5, tailbatch.Options{}))
	fb.Remove(tailRule)
	if err := l.ship.ShipTail(ctx); err != nil {
		t.Fatalf("tail pass with the shipped position below the reclaim base: %v", err)
	}
	if got, tip := l.ShippedThrough(), l.store.Tip(); got != tip {
		t.Fatalf("shipped through %d, tip %d", got, tip)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Finding 4, GC's part: a GC pass moves the shipped position up to the new
// reclaim base itself, before any tail pass.
func TestGCMovesShippedToTheReclaimBase(t *testing.T) {
	ctx := ctxT(t)
	fb, b := s3FaultBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 2048, Logger: quiet()})
	defer l.Close()
	seg2Last, _, _ := partlyUploaded(t, l, fb)
	l.ship.SetReplicatorForTest(tailbatch.New(0, 0, tailbatch.Options{}))
	rep, err := l.GC(ctx, GCRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Base != seg2Last+1 {
		t.Fatalf("GC base %d, want %d: %+v", rep.Base, seg2Last+1, rep)
	}
	if got := l.ShippedThrough(); got < seg2Last {
		t.Fatalf("shipped through %d after GC reclaimed through %d", got, seg2Last)
	}
}
