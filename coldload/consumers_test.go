package coldload_test

import (
	"context"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/tailbatch"
	"testing"
)

// writeOwnersCursor writes the cursor object as the engine does when only a
// consumer changed: the owner's shipped position and live consumers.
func (o *owner) writeOwnersCursor() {
	o.t.Helper()
	if _, err := o.rep.SyncCursor(context.Background(), o.b, o.snapshot().Consumers); err != nil {
		o.t.Fatalf("write cursor: %v", err)
	}
}

func (o *owner) pullAck(name string, seq uint64) {
	o.t.Helper()
	if _, err := o.st.Pull(name, 1); err != nil {
		o.t.Fatalf("pull %s: %v", name, err)
	}
	if seq > 0 {
		if _, err := o.st.Ack(name, seq); err != nil {
			o.t.Fatalf("ack %s %d: %v", name, seq, err)
		}
	}
}

func (o *owner) deleteConsumer(name string) {
	o.t.Helper()
	if err := o.st.DeleteConsumer(name); err != nil {
		o.t.Fatalf("delete %s: %v", name, err)
	}
}

func consumersOf(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	snap, err := openRO(t, dir).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap.Consumers
}

// Finding 6: a consumer deleted by its owner stays deleted after a restore.
// Its ConsumerCreate and Ack ride in a tail object (between events), its
// ConsumerDelete is the last frame and never ships, and the same tick
// rewrites the cursor object without it: the cursor object, written after
// every frame up to its shipped_through, says it is gone.
func TestRestoreKeepsADeletedConsumerDeleted(t *testing.T) {
	t.Run("delete after the last event, cursor object rewritten", func(t *testing.T) {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 1<<20)
		o.append(3)
		o.pullAck("gone", 2)
		o.pullAck("kept", 1)
		o.append(2)
		o.ship() // tail 1..5 carries both consumers; cursor {gone:2, kept:1}
		o.deleteConsumer("gone")
		o.writeOwnersCursor() // {kept:1}
		dir, rep := mustHydrate(t, b, 0, coldload.Options{})
		got := consumersOf(t, dir)
		if _, ok := got["gone"]; ok || got["kept"] != 1 || len(got) != 1 {
			t.Fatalf("consumers after restore %+v, want only kept at 1", got)
		}
		if rep.Consumers != 1 || len(rep.ConsumersDeleted) != 1 || rep.ConsumersDeleted[0] != "gone" {
			t.Fatalf("report consumers %d, deleted %v", rep.Consumers, rep.ConsumersDeleted)
		}
		// The restored store does not bring it back on a writable open.
		st := openRW(t, dir)
		snap, _ := st.Snapshot()
		if _, ok := snap.Consumers["gone"]; ok {
			t.Fatalf("the writable open brought it back: %+v", snap.Consumers)
		}
	})
	t.Run("delete in a sealed segment, cursor object older", func(t *testing.T) {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 1<<20)
		o.append(3)
		o.pullAck("gone", 2)
		o.append(2)
		o.ship() // cursor {gone:2} at 5
		o.deleteConsumer("gone")
		o.seal()
		o.publish() // the segment holds the ConsumerDelete; no cursor rewrite
		dir, _ := mustHydrate(t, b, 0, coldload.Options{})
		if got := consumersOf(t, dir); len(got) != 0 {
			t.Fatalf("consumers after restore %+v, want none", got)
		}
	})
	t.Run("a consumer created after the cursor object's last write survives", func(t *testing.T) {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 1<<20)
		o.append(5)
		o.ship() // cursor {} at 5
		o.pullAck("late", 3)
		o.seal()
		o.publish() // the segment holds ConsumerCreate late, Ack 3
		dir, _ := mustHydrate(t, b, 0, coldload.Options{})
		if got := consumersOf(t, dir); len(got) != 1 || got["late"] != 3 {
			t.Fatalf("consumers after restore %+v, want late at 3", got)
		}
	})
	t.Run("a consumer created after the cursor object's last write, in a tail object, survives", func(t *testing.T) {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 1<<20)
		o.append(5)
		o.ship() // cursor {} at 5
		o.pullAck("late", 3)
		o.append(1)
		// The tail object 6..6 (carrying ConsumerCreate late, Ack 3) lands;
		// the cursor object write that would follow does not happen.
		batches, err := o.rep.Prepare(o.st)
		if err != nil || len(batches) != 1 {
			t.Fatalf("prepare: %v %v", batches, err)
		}
		if err := tailbatch.Upload(context.Background(), b, o.st, batches[0]); err != nil {
			t.Fatal(err)
		}
		dir, _ := mustHydrate(t, b, 0, coldload.Options{})
		if got := consumersOf(t, dir); len(got) != 1 || got["late"] != 3 {
			t.Fatalf("consumers after restore %+v, want late at 3", got)
		}
	})
	t.Run("a consumer deleted and created again keeps the new one", func(t *testing.T) {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 1<<20)
		o.append(3)
		o.pullAck("c", 3)
		o.append(2)
		o.ship() // cursor {c:3}
		o.deleteConsumer("c")
		o.pullAck("c", 1)
		o.writeOwnersCursor() // {c:1}
		o.append(1)
		o.ship() // tail 6..6 carries Delete c, Create c, Ack 1
		dir, _ := mustHydrate(t, b, 0, coldload.Options{})
		if got := consumersOf(t, dir); len(got) != 1 || got["c"] != 1 {
			t.Fatalf("consumers after restore %+v, want c at 1 (the new incarnation)", got)
		}
	})
}
