package bucketlog

import (
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestFenceVanishedHighestClaimIsNotClaimedAgain: the highest claim's key
// vanished (a lifecycle rule that should not have matched it, an edited
// bucket) while its start record stayed. A takeover counts the start
// record as the epoch's claim (docs/FORMAT.md §6.9, step 1): it re-creates
// the vanished claim and claims the epoch above, so the owner of the
// vanished epoch is fenced and the newcomer starts. Counting claims alone,
// the newcomer would claim the vanished epoch again and its cut would meet
// the existing start record on every open: a shard that never starts.
func TestFenceVanishedHighestClaimIsNotClaimedAgain(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	a := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	defer b.Close()
	if b.ship.Epoch() != 2 {
		t.Fatalf("B's epoch %d, want 2", b.ship.Epoch())
	}
	if _, err := b.Append(ctx, ev("y", 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := shared.Delete(ctx, blobtier.ClaimKey(0, 2)); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, fenceOpts(t.TempDir(), newView(shared), false))
	if err != nil {
		t.Fatalf("a takeover after the highest claim vanished: %v", err)
	}
	defer c.Close()
	if c.ship.Epoch() != 3 || c.store.Tip() != 4 || !c.Status().Ready {
		t.Fatalf("C: epoch %d tip %d ready %v, want epoch 3 over B's 4 events, ready", c.ship.Epoch(), c.store.Tip(), c.Status().Ready)
	}
	if got := claims(t, shared); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("claims %v, want 1, 2 (re-created) and 3", got)
	}
	if _, err := b.Append(ctx, ev("y", 5)); err != nil {
		t.Fatal(err)
	}
	_, err = b.Ship(ctx, false)
	wantFenced(t, "B's tick after C's claim", err)
	if _, err := c.Append(ctx, ev("z", 5)); err != nil {
		t.Fatal(err)
	}
}
