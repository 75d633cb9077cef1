package coldload_test

import (
	"testing"

	"github.com/bucketlog/bucketlog/coldload"
)

// Finding 6, the sealed-segment form (the simulation's seed 523): a
// consumer's ConsumerCreate is the last frame of a segment that sealed and
// reached the bucket, its ConsumerDelete is the last frame of the active
// segment (no event after it, so no tail object carries it), and a ship
// pass rewrote the cursor object without it. The create is positioned
// after the cursor object's shipped_through event, so the frames alone
// cannot tell it is older than the object: the object's tombstone does.
func TestRestoreTombstoneKeepsATrailingCreateDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		// between the cursor write that knew the consumer and its delete
		written bool
	}{
		{"the cursor object listed it", true},
		{"created and deleted between two cursor writes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := memBucket(t)
			o := newOwner(t, b, 0, 1<<20)
			o.append(5)
			o.ship() // cursor {} at 5
			o.pullAck("gone", 0)
			if tc.written {
				o.ship() // cursor {gone:0} at 5
			}
			o.seal()
			o.publish() // the segment ends with ConsumerCreate gone
			o.deleteConsumer("gone")
			if res := o.ship(); !res.CursorWritten {
				t.Fatalf("the pass after the delete wrote no cursor object: %+v", res)
			}
			dir, rep := mustHydrate(t, b, 0, coldload.Options{})
			if got := consumersOf(t, dir); len(got) != 0 {
				t.Fatalf("consumers after restore %+v, want none (gone was deleted and shipped)", got)
			}
			if len(rep.ConsumersDeleted) != 1 || rep.ConsumersDeleted[0] != "gone" {
				t.Fatalf("report deleted %v, want [gone]", rep.ConsumersDeleted)
			}
		})
	}
}

// The tombstone does not hide a consumer created again after its delete:
// the frames after the ConsumerDelete are newer than the object.
func TestRestoreTombstoneKeepsARecreatedConsumer(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 1<<20)
	o.append(5)
	o.ship()
	o.pullAck("c", 0)
	o.ship() // cursor {c:0} at 5
	o.deleteConsumer("c")
	o.ship() // cursor {} at 5, c tombstoned
	o.pullAck("c", 2)
	o.seal()
	o.publish() // the segment holds Create c, Delete c, Create c, Ack 2 after event 5
	dir, _ := mustHydrate(t, b, 0, coldload.Options{})
	if got := consumersOf(t, dir); len(got) != 1 || got["c"] != 2 {
		t.Fatalf("consumers after restore %+v, want c at 2 (created again after its delete)", got)
	}
}
