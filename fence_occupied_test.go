package bucketlog

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// A zombie's tail object occupies the key of the new owner's tail batch
// (the same first and last sequence, other events) while every segment put
// fails: the new owner ships its events under another key (a batch with
// another last sequence, FENCING.md's "412 on any upload"), so a failing
// segment upload does not stall the tail (sim -sim.writers seed 396). Kills
// the version that ships around the occupant only in a sealed segment.
func TestFenceZombieTailOnOurKeyShipsUnderAnotherKey(t *testing.T) {
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
	b := mustOpen(t, fenceOpts(t.TempDir(), vb, false))
	defer b.Close()
	// A, paused through the takeover, acknowledges 4..6 locally and puts
	// its tail object 4..6 before its HEAD finds the claim.
	for i := 4; i <= 6; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Ship(ctx, false)
	wantFenced(t, "A's tick after the takeover", err)
	zombieKey := blobtier.TailKey(0, 4, 6)
	if _, err := shared.Stat(ctx, zombieKey); err != nil {
		t.Fatalf("A's tail object %s: %v", zombieKey, err)
	}
	for i := 4; i <= 6; i++ {
		if _, err := b.Append(ctx, ev("y", i)); err != nil {
			t.Fatal(err)
		}
	}
	errSeg := errors.New("segment puts refused")
	vb.setHooks(func(op blobtier.Op, key string) error {
		if op == blobtier.OpPut && kindOf(key) == "seg" {
			return errSeg
		}
		return nil
	}, nil)
	if _, err := b.Ship(ctx, false); err != nil {
		t.Fatalf("B's tick with A's object on its key and segment puts refused: %v", err)
	}
	if got := b.ShippedThrough(); got != 6 {
		t.Fatalf("B shipped through %d, want 6", got)
	}
	got, _, err := lineageOracle(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		who := "x"
		if i > 3 {
			who = "y"
		}
		e := ev(who, i)
		if got[uint64(i)] != ident(e.ExecutionID, e.TransactionID, e.Payload) {
			t.Fatalf("sequence %d in the lineage: %q, want %s's", i, got[uint64(i)], who)
		}
	}
}

// B's GC commits a watermark whose response is lost (B reclaims nothing
// yet); then zombie A's GC reads that watermark of B's epoch: it must delete
// no object under it (the watermark is B's to apply, local store first), or
// B's store, still holding those events locally as evicted segments, reads
// them from a bucket that lost them (sim -sim.writers seed 6101). Kills the
// guard without its Delete.
func TestFenceZombieGCDeletesNothingUnderANewerWatermark(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	va, vb := newView(shared), newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), va, false))
	defer a.Close()
	for i := 1; i <= 8; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := a.Ship(ctx, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := a.Pull(ctx, "c", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ack(ctx, "c", 8); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, fenceOpts(t.TempDir(), vb, false))
	defer b.Close()
	vb.setHooks(nil, func(op blobtier.Op, key string, err error) error {
		if op == blobtier.OpCAS && key == blobtier.WatermarkKey(0) && err == nil {
			return errors.New("the response was lost")
		}
		return err
	})
	b.GC(ctx, GCRequest{MinRetainedSegments: 1, MaxRetainedSegments: 1})
	vb.setHooks(nil, nil)
	data, _, err := shared.Get(ctx, blobtier.WatermarkKey(0))
	if err != nil {
		t.Fatalf("B's GC committed no watermark: %v", err)
	}
	segs := func() []string {
		var keys []string
		for info, err := range shared.List(ctx, 0, blobtier.KindSegment) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, info.Key)
		}
		return keys
	}
	before := segs()
	rep, err := a.GC(ctx, GCRequest{MinRetainedSegments: 1, MaxRetainedSegments: 1})
	if after := segs(); len(after) != len(before) {
		t.Fatalf("zombie A's GC under B's watermark %s deleted segment objects: %v → %v", data, before, after)
	}
	// Its report says what happened: fenced, its deletes refused, not
	// "reclaimed".
	if !errors.Is(err, ErrFenced) || rep.Outcome != "fenced" {
		t.Fatalf("zombie A's GC whose deletes were fenced answered outcome %q, error %v; want outcome \"fenced\" and ErrFenced", rep.Outcome, err)
	}
	if rep.Shared == nil || rep.Shared.Deleted.Segments != 0 || rep.Shared.Deleted.Failed == 0 {
		t.Fatalf("zombie A's GC report: %+v; want no object deleted and the refused deletes counted", rep.Shared)
	}
}
