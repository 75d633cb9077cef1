package bucketlog

import (
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

func restoredConsumers(t *testing.T, root string) map[string]uint64 {
	t.Helper()
	st, err := localseg.Open(localseg.ShardDir(root, 0), localseg.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap.Consumers
}

// Issue 12 finding 6, end to end: a consumer deleted on the owner does not
// come back in a restore from the bucket alone, and holds nothing there.
func TestRestoreKeepsDeletedConsumerDeleted(t *testing.T) {
	ctx := ctxT(t)
	for _, shipBetween := range []bool{false, true} {
		b := memBucket(t)
		l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
		for i := 1; i <= 3; i++ {
			if _, err := l.Append(ctx, ev("1", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Pull(ctx, "gone", 10); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Ack(ctx, "gone", 2); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Pull(ctx, "kept", 10); err != nil {
			t.Fatal(err)
		}
		// More events after the consumer frames: the tail object carries
		// ConsumerCreate and Ack of "gone" between events.
		for i := 4; i <= 5; i++ {
			if _, err := l.Append(ctx, ev("1", i)); err != nil {
				t.Fatal(err)
			}
		}
		if shipBetween {
			if _, err := l.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
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
			t.Fatalf("restore: %v", err)
		}
		got := restoredConsumers(t, dst)
		if _, ok := got["gone"]; ok || len(got) != 1 {
			t.Fatalf("ship between %v: consumers after restore %+v (report %+v), want only kept", shipBetween, got, rep)
		}
	}
}
