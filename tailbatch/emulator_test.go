package tailbatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

type emu interface {
	CreateBucket(name string) error
	OpenBucket(ctx context.Context, name string) (*blob.Bucket, error)
	Close() error
}

// One end-to-end run on each real-protocol emulator: passes ship the tail
// and write the cursor object by compare-and-swap; a lost race on the
// cursor is retried; sealed segments and tail objects together hold every
// event; after a crash the rebuilt cursor ships the events acknowledged
// just before it; and a second writer's object under a tail key is a
// conflict the replicator stops on.
func TestEndToEndOnEmulators(t *testing.T) {
	if testing.Short() {
		t.Skip("emulators in -short mode")
	}
	starts := map[string]func() (emu, error){
		"gofakes3":        func() (emu, error) { return emulator.StartS3() },
		"fake-gcs-server": func() (emu, error) { return emulator.StartGCS() },
	}
	for name, start := range starts {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			e, err := start()
			if err != nil {
				t.Fatalf("start %s: %v", name, err)
			}
			t.Cleanup(func() { e.Close() })
			if err := e.CreateBucket("log"); err != nil {
				t.Fatal(err)
			}
			raw, err := e.OpenBucket(ctx, "log")
			if err != nil {
				t.Fatal(err)
			}
			b := newBlobBucket(t, raw)
			if !b.CanCAS() {
				t.Fatalf("%s bucket cannot compare-and-swap", name)
			}
			endToEnd(t, ctx, b)
		})
	}
}

func endToEnd(t *testing.T, ctx context.Context, inner blobtier.Bucket) {
	const shard = 6
	b := newTestBucket(inner)
	dir := t.TempDir()
	opts := localseg.Options{SegmentMaxBytes: 4 << 10}
	s, err := localseg.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := tailbatch.New(shard, 0, tailbatch.Options{})
	appendN(t, s, 10)
	if _, err := s.Pull("proj", 5); err != nil {
		t.Fatal(err)
	}
	for pass := range 4 {
		appendN(t, s, 25)
		if _, err := s.Ack("proj", s.Tip()-3); err != nil {
			t.Fatal(err)
		}
		res, err := r.Replicate(ctx, s, b)
		if err != nil || res.ShippedThrough != s.Tip() || !res.CursorWritten {
			t.Fatalf("pass %d: %+v, %v", pass, res, err)
		}
	}
	if n := b.count(opCAS); n != 4 || b.count(opPut) != 0 {
		t.Fatalf("cursor writes: %d compare-and-swaps, %d plain puts; want 4 and 0", n, b.count(opPut))
	}
	c, _, err := tailbatch.ReadCursor(ctx, b, shard)
	if err != nil || c.V != 4 || c.ShippedThrough != s.Tip() || c.Consumers["proj"] != s.Tip()-3 {
		t.Fatalf("cursor object %+v, %v", c, err)
	}

	// A competing cursor write slips in; ours retries on the new version.
	if _, err := tailbatch.WriteCursor(ctx, inner, shard, s.Tip()+100, nil); err != nil {
		t.Fatal(err)
	}
	if c, err := tailbatch.WriteCursor(ctx, b, shard, s.Tip(), nil); err != nil || c.V != 6 || c.ShippedThrough != s.Tip()+100 {
		t.Fatalf("write after a competitor: %+v, %v", c, err)
	}

	durable := uploadSealed(t, ctx, s, inner, shard)
	shipped := r.ShippedThrough()
	acked := appendN(t, s, 5) // then the process dies before the tick
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStoreIn(t, dir, opts)
	start, err := rebuildCursor(ctx, b, shard, 0, durable)
	if err != nil || start != shipped {
		t.Fatalf("rebuilt cursor %d, %v; want %d", start, err, shipped)
	}
	r2 := tailbatch.New(shard, start, tailbatch.Options{})
	if res, err := r2.Replicate(ctx, s2, b); err != nil || res.Records != acked-shipped {
		t.Fatalf("pass after the crash: %+v, %v", res, err)
	}
	got := bucketEvents(t, ctx, inner, shard)
	if m := missing(got, acked); len(m) != 0 {
		t.Fatalf("bucket misses %v", m)
	}

	// A second writer: different bytes under the next tail key.
	other := openStore(t, localseg.Options{})
	for i := range int(acked) + 2 {
		if _, err := other.Append(event(i+1, "other writer")); err != nil {
			t.Fatal(err)
		}
	}
	otherRep := tailbatch.New(shard, acked, tailbatch.Options{})
	batches, err := otherRep.Prepare(other)
	if err != nil || len(batches) != 1 {
		t.Fatalf("other writer prepare: %v, %v", batches, err)
	}
	if err := tailbatch.Upload(ctx, inner, other, batches[0]); err != nil {
		t.Fatalf("other writer upload: %v", err)
	}
	appendN(t, s2, 2)
	_, err = r2.Replicate(ctx, s2, b)
	if !errors.Is(err, blobtier.ErrConflict) || r2.Stats().Conflicts != 1 {
		t.Fatalf("a second writer's object: err %v, stats %+v", err, r2.Stats())
	}
	if _, err := r2.Prepare(s2); !errors.Is(err, tailbatch.ErrStopped) {
		t.Fatalf("after the conflict prepare = %v", err)
	}
}
