package bucketlog

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/frame"
)

// Open's start-up reconcile under the lineage rule (docs/FORMAT.md,
// "Writer fencing"): a zombie's objects beyond the cut are not the bucket's
// history, so they neither make a disk look behind nor diverged.

// zombieTailBucket: A (epoch 1) ships 1..3, B takes over (epoch 2, cut at
// 3), A appends 4..5 and ships them as a zombie tail (epoch 1, beyond
// end(1) = 3) before its HEAD fences it. It returns B's view of the
// bucket, B and B's directory.
func zombieTailBucket(t *testing.T) (*writerView, *Log, string) {
	t.Helper()
	ctx := ctxT(t)
	shared := casBucket(t)
	va, vb := newView(shared), newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), va, false))
	defer a.Close()
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	dirB := t.TempDir()
	b := mustOpen(t, fenceOpts(dirB, vb, false))
	for i := 4; i <= 5; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Ship(ctx, false)
	wantFenced(t, "A's tick after the takeover", err)
	return vb, b, dirB
}

// TestFenceHydrateOverZombieTailOpens: a third owner C hydrating an empty
// disk from that bucket follows the chain (3 events), and its reconcile
// must not read the zombie tail 4..5 as the bucket's tip.
func TestFenceHydrateOverZombieTailOpens(t *testing.T) {
	vc, b, _ := zombieTailBucket(t)
	b.Close()
	c, err := Open(ctxT(t), fenceOpts(t.TempDir(), vc, false))
	if err != nil {
		t.Fatalf("C's Open over a zombie tail beyond the cut: %v", err)
	}
	defer c.Close()
	if c.ship.Epoch() != 3 || c.store.Tip() != 3 {
		t.Fatalf("C: epoch %d tip %d, want epoch 3 over the chain's 3 events", c.ship.Epoch(), c.store.Tip())
	}
	if _, err := c.Append(ctxT(t), ev("c", 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ship(ctxT(t), false); err != nil {
		t.Fatal(err)
	}
	checkAckedTip(t, vc, 4)
}

// TestFenceSameDiskRestartOverZombieTailOpens: B itself restarts on its
// disk after appending and shipping its own 4: the zombie tail 4..5 ends
// above B's tip, and must not read as a disk behind the bucket.
func TestFenceSameDiskRestartOverZombieTailOpens(t *testing.T) {
	ctx := ctxT(t)
	vb, b, dirB := zombieTailBucket(t)
	for i := 4; i <= 4; i++ {
		if _, err := b.Append(ctx, ev("y", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b2, err := Open(ctxT(t), fenceOpts(dirB, vb, false))
	if err != nil {
		t.Fatalf("B's same-disk restart over a zombie tail: %v", err)
	}
	defer b2.Close()
	if b2.ship.Epoch() != 2 || b2.store.Tip() != 4 {
		t.Fatalf("B: epoch %d tip %d", b2.ship.Epoch(), b2.store.Tip())
	}
	checkAckedTip(t, vb, 4)
}

// checkAckedTip: the lineage of the bucket is gapless through tip.
func checkAckedTip(t *testing.T, v *writerView, tip uint64) {
	t.Helper()
	got, _, err := lineageOracle(ctxT(t), v.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(got)) != tip {
		t.Fatalf("the lineage holds %d events, want %d: %v", len(got), tip, got)
	}
}

// TestFenceRestartDoesNotCountAZombieTailAsShipped: B appends 4..6 and
// restarts before shipping them; the zombie tail 4..5 must not count in the
// cursor B rebuilds, or B would ship only 6 and its 4..5 would never reach
// the bucket (a gap in the lineage).
func TestFenceRestartDoesNotCountAZombieTailAsShipped(t *testing.T) {
	ctx := ctxT(t)
	vb, b, dirB := zombieTailBucket(t)
	for i := 4; i <= 6; i++ {
		if _, err := b.Append(ctx, ev("y", i)); err != nil {
			t.Fatal(err)
		}
	}
	// B's last shipment at Close fails: 4..6 stay unshipped.
	vb.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "tail") {
			return errors.New("test: tail put refused")
		}
		return nil
	}, nil)
	b.Close()
	vb.setHooks(nil, nil)
	if got, _, _ := lineageOracle(ctx, vb.Bucket); len(got) != 3 {
		t.Fatalf("before the restart the lineage holds %d events, want 3", len(got))
	}
	b2, err := Open(ctx, fenceOpts(dirB, vb, false))
	if err != nil {
		t.Fatalf("B's restart: %v", err)
	}
	defer b2.Close()
	if _, err := b2.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	checkAckedTip(t, vb, 6)
}

// TestFenceHydrateOverZombieSealOpens: the zombie A seals and uploads its
// active segment after the cut (epoch 1, holding 1..5 of which 1..3 are
// valid). It was unsealed at the takeover, A's start segment with no object
// at it, so the cut's fence sits at that id: the seal lies in the cut's gap
// (the new owner's copy of 1..3 is in its own start segment). A new owner
// hydrating the bucket and its restart skip it, whatever its bytes.
func TestFenceHydrateOverZombieSealOpens(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	a := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	defer a.Close()
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	b.Close()
	for i := 4; i <= 5; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Ship(ctx, true)
	wantFenced(t, "A's seal and ship after the takeover", err)
	var zombieSeal bool
	for info, err := range shared.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			t.Fatal(err)
		}
		if st, err := shared.Stat(ctx, info.Key); err == nil && st.Meta.Epoch == 1 {
			zombieSeal = true
		}
	}
	if !zombieSeal {
		t.Fatal("the zombie sealed nothing into the bucket: the test needs its segment")
	}
	vc := newView(shared)
	c, err := Open(ctx, fenceOpts(t.TempDir(), vc, false))
	if err != nil {
		t.Fatalf("C's Open over a zombie seal: %v", err)
	}
	defer c.Close()
	if c.store.Tip() != 3 {
		t.Fatalf("C's tip %d, want 3", c.store.Tip())
	}
	if _, err := c.Append(ctx, ev("c", 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	checkAckedTip(t, vc, 4)
	if !t.Run("in the gap", func(t *testing.T) { zombieSealDiverged(t, shared, vc, c) }) {
		t.Fatal("the zombie's seal in the cut's gap")
	}
}

// zombieSealDiverged: the zombie's segment is replaced by one whose first
// events (1..3) differ from C's local copy in event 2: it lies in the cut's
// gap, so C's restart skips it (before the segment-id jump it lay below the
// fence and C refused it as a diverged disk).
func zombieSealDiverged(t *testing.T, shared blobtier.Bucket, vc *writerView, c *Log) {
	ctx := ctxT(t)
	dir := c.opts.Dir
	c.Close()
	var key string // the zombie's seal: its epoch's start segment (the store's jump)
	for info, err := range shared.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			t.Fatal(err)
		}
		if st, err := shared.Stat(ctx, info.Key); err == nil && st.Meta.Epoch == 1 {
			key = info.Key
		}
	}
	var data []byte
	for i := 1; i <= 5; i++ {
		e := ev("x", i)
		if i == 2 {
			e.Payload = `{"n":2,"other":true}`
		}
		data = frame.AppendEvent(data, uint64(i), e.ExecutionID, e.TransactionID, e.Payload)
	}
	if err := shared.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := shared.PutIfAbsent(ctx, key, data, 1); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, fenceOpts(dir, vc, false))
	if err != nil {
		t.Fatalf("C's restart over a zombie segment in the cut's gap: %v", err)
	}
	l.Close()
}
