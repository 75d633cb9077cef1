package bucketlog

import "testing"

// Tail cleanup bound to the committed watermark's durable_seq
// (docs/FORMAT.md, "Writer fencing": GC and the watermark).

// TestFenceZombieCleanupKeepsTheNewOwnersTails: B took over at 3 and
// shipped its acknowledged 4..5 as a tail object; the zombie A then seals
// and uploads its own 1..5 (4..5 beyond the cut) and runs tail cleanup
// with its local contiguous durable end 5. It must not delete B's tail
// object: B's acknowledged events would be gone from the bucket.
func TestFenceZombieCleanupKeepsTheNewOwnersTails(t *testing.T) {
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
	b := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), true))
	defer b.Close()
	ackB := acked{}
	for i := 4; i <= 5; i++ {
		if err := ackB.append(t, b, ev("y", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 4; i <= 5; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Ship(ctx, true) // seal, upload, tail cleanup; then fenced
	t.Logf("A's seal and ship: %v", err)
	checkAcked(t, shared, ackB)
}
