package bucketlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
)

// A takeover (a lost disk, hydrated from the bucket) finds the older
// epoch's tail object of its first events damaged at rest, and its own
// segment uploads refused: the tail must still ship (issue 12 finding 4),
// under keys of other cuts than the damaged object's, since it cannot take
// that key and shipping around it through the segment fails.
func TestTailShipsAroundADamagedOlderTailWhileSegmentsFail(t *testing.T) {
	ctx := ctxT(t)
	raw := memcas.OpenBucket(nil)
	shared := blobtier.New(raw, blobtier.Options{Timeout: 5 * time.Second})
	defer shared.Close()
	// A ships 1 and then 2..3 as tail objects, its cursor object left at
	// 1 (a tick's cursor interval, or a failed cursor write).
	va := newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), va, false))
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if _, err := a.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			va.setHooks(refuseKind(blobtier.KindCursor), nil)
		}
	}
	a.Ship(ctx, false)
	if a.ShippedThrough() != 3 {
		t.Fatalf("A shipped through %d", a.ShippedThrough())
	}
	a.Close()
	key := blobtier.TailKey(0, 2, 3)
	if _, _, err := shared.Get(ctx, key); err != nil {
		t.Fatalf("A's tail object: %v", err)
	}

	// B takes the shard over on a new disk, its segment puts refused.
	vb := newView(shared)
	bdir := t.TempDir()
	b := mustOpen(t, fenceOpts(bdir, vb, false))
	vb.setHooks(refuseKind(blobtier.KindSegment, blobtier.KindCursor), nil)
	b.Ship(ctx, true) // seals 1..3, whose upload fails
	for i := 4; i <= 5; i++ {
		if _, err := b.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	damageAtRest(t, raw, key)
	vb.setHooks(refuseKind(blobtier.KindSegment), nil)
	b = mustOpen(t, fenceOpts(bdir, vb, false))
	defer b.Close()
	if got := b.ShippedThrough(); got >= 2 {
		t.Fatalf("B shipped through %d at start, counting the damaged %s", got, key)
	}
	for pass := 0; pass < 2; pass++ {
		b.Ship(context.Background(), false)
	}
	if got := b.ShippedThrough(); got != 5 {
		t.Fatalf("with only segment puts failing, the tail shipped through %d, want 5", got)
	}
	rep, err := Restore(ctx, RestoreOptions{Bucket: shared, Dir: t.TempDir()})
	if err != nil || rep.LastSeq != 5 {
		t.Fatalf("restore from the bucket alone: %+v, %v", rep, err)
	}
}

// refuseKind fails every request on an object of the kinds given.
func refuseKind(kinds ...blobtier.Kind) func(blobtier.Op, string) error {
	return func(op blobtier.Op, k string) error {
		for _, kind := range kinds {
			if kindOf(k) == kind.String() && op != blobtier.OpGet && op != blobtier.OpStat && op != blobtier.OpList {
				return errors.New("injected: refused")
			}
		}
		return nil
	}
}
