package bucketlog

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
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
