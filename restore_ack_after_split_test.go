package bucketlog

import "testing"

// A consumer acked after the cursor object's shipped_through event and then
// deleted, with the Ack in a shipped segment and the ConsumerDelete alone in
// the next one: the cursor object written after both no longer lists it, and
// the Ack frame (older than that write: with no ConsumerCreate after the
// event, a consumer acking after the write would be listed) does not bring
// it back (found by internal/sim, seed 488: adopt-deleted-consumer).
func TestRestoreAckAfterSplitDoesNotReviveDeletedConsumer(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Logger: quiet()})
	for i := 1; i <= 2; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Pull(ctx, "gone", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, ev("1", 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "gone", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, true); err != nil { // segment 1 ends with the Ack
		t.Fatal(err)
	}
	if err := l.DeleteConsumer(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst})
	if err != nil {
		t.Fatal(err)
	}
	if got := restoredConsumers(t, dst); len(got) != 0 {
		t.Fatalf("consumers after restore %v (report %+v), want none", got, rep)
	}
}
