package shipper_test

import (
	"context"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/shipper"
)

// A sealed segment that holds no event (only consumer frames: a pull and
// an ack, then a seal) whose put landed damaged bytes under our metadata
// and whose read-back failed, then a restart: neither the shipped position
// nor a tail object (none covers a consumer frame) vouches that a running
// uploader ever read it back intact, so at start it is read back and put
// again (issue 12 finding 2: durable means read back intact). It counted
// durable on its metadata alone and a restore failed on it once its
// successor's tail objects were cleaned up (the simulation's seeds 11705
// and 17530).
func TestEventlessSegmentReadBackAtStart(t *testing.T) {
	// Followed by a sealed segment with events (not uploaded: the pass
	// stopped at the failure), or the last sealed segment.
	for _, sealNext := range []bool{true, false} {
		t.Run(map[bool]string{true: "before_a_segment_with_events", false: "last_sealed"}[sealNext], func(t *testing.T) {
			eventlessReadBack(t, sealNext)
		})
	}
}

func eventlessReadBack(t *testing.T, sealNext bool) {
	ctx := context.Background()
	raw := memcas.New(time.Now)
	fb := faultbucket.NewDriver(raw, 1)
	b := blobtier.New(blob.NewBucket(fb), blobtier.Options{})
	defer b.Close()
	st := open(t, t.TempDir())
	appendN(t, st, 3)
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pull("c", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ack("c", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	appendN(t, st, 3) // the successor, sealed or left active
	if sealNext {
		if _, err := st.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	empty := snap.Segments[1]
	if !empty.Sealed || empty.Events != 0 {
		t.Fatalf("fixture: segment %+v is not a sealed segment without events", empty)
	}
	key := blobtier.SegmentKey(0, empty.ID)
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Corrupt, Key: key, Times: 1})
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: key, Times: 2})
	s, err := shipper.New(ctx, st, b, opts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ship(ctx, false); err == nil {
		t.Fatal("the pass whose read-back failed reported success")
	}
	if _, _, err := b.Get(ctx, key); err == nil {
		t.Fatal("fixture: the put did not land damaged bytes")
	}

	s, err = shipper.New(ctx, st, b, opts()) // killed and restarted
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, key); err != nil {
		t.Fatalf("after a restart and a ship pass the segment without events is still damaged: %v", err)
	}
}

// The other side: a segment without events that a running uploader read
// back intact, followed by a segment with events read back too (its tail
// objects cleaned up), is not downloaded again at start (Open stays O(1)
// in the log's length, issue 12 finding 14): a read of it is refused here.
func TestEventlessSegmentVouchedBySuccessor(t *testing.T) {
	ctx := context.Background()
	raw := memcas.New(time.Now)
	fb := faultbucket.NewDriver(raw, 1)
	b := blobtier.New(blob.NewBucket(fb), blobtier.Options{})
	defer b.Close()
	st := open(t, t.TempDir())
	appendN(t, st, 3)
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pull("c", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ack("c", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	appendN(t, st, 3)
	s, err := shipper.New(ctx, st, b, opts())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Ship(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if tails := raw.Keys(blobtier.ListPrefix(0, blobtier.KindTail)); len(tails) > 0 {
		t.Fatalf("fixture: tail objects left %v", tails)
	}
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: blobtier.SegmentKey(0, 2)})
	if _, err := shipper.New(ctx, st, b, opts()); err != nil {
		t.Fatalf("a restart read the segment without events again: %v", err)
	}
}
