package shipper

import (
	"context"
	"errors"
	"testing"
)

// TestZombieMaintenanceKeepsTheNewOwnersTails: A owns epoch 1 and shipped
// 1..3; B claims epoch 2, cuts at 3 and ships its acknowledged 4..5 as a
// tail object. A (a zombie: it has not looked since) appends its own 4..5,
// seals, and its maintenance pass uploads the segment and cleans up tails
// with its local contiguous durable end 5. The cleanup must not delete
// B's tail object: B's acknowledged events would be gone. (The background
// pass ships no tail, so no HEAD of a tail put precedes its deletes.)
func TestZombieMaintenanceKeepsTheNewOwnersTails(t *testing.T) {
	ctx := context.Background()
	s, b, bKey := zombieSetup(t, zombieCase{})
	err := s.maintain(ctx, false)
	t.Logf("the zombie's maintenance pass: %v (stopped: %v)", err, s.stopped())
	if _, err := b.Stat(ctx, bKey); err != nil {
		t.Fatalf("the new owner's acknowledged tail object %s after the zombie's cleanup: %v", bKey, err)
	}
	if !errors.Is(s.stopped(), ErrFenced) {
		t.Fatalf("the zombie is not fenced after its pass: %v", s.stopped())
	}
}
