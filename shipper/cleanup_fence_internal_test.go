package shipper

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
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
	b := blobtier.New(memcas.OpenBucket(nil), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	put := func(key string, v interface{ Encode() ([]byte, error) }, epoch uint64) {
		t.Helper()
		data, err := v.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.PutIfAbsent(ctx, key, data, epoch); err != nil {
			t.Fatal(err)
		}
	}
	put(blobtier.ClaimKey(0, 1), fencing.Claim{Epoch: 1, Shard: 0, Owner: "a", Nonce: fencing.NewNonce()}, 1)
	put(blobtier.StartKey(0, 1), fencing.NewStartRecord(1, 0, 0, 0, 0), 1)

	st, err := localseg.Open(t.TempDir(), localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev := func(who string, i int) localseg.Event {
		return localseg.Event{ExecutionID: who, TransactionID: fmt.Sprintf("%s-%d", who, i), Payload: `{"n":1}`}
	}
	for i := 1; i <= 3; i++ {
		if _, err := st.Append(ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{TailReplication: true, TailInterval: time.Hour, SyncWait: time.Second, StartupTimeout: time.Second,
		UploadRetryMax: time.Second, Fencing: true, Epoch: 1}
	s, err := New(ctx, st, b, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)
	if _, err := s.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}

	// B's takeover and its acknowledged tail 4..5.
	put(blobtier.ClaimKey(0, 2), fencing.Claim{Epoch: 2, Shard: 0, Owner: "b", Nonce: fencing.NewNonce()}, 2)
	put(blobtier.StartKey(0, 2), fencing.NewStartRecord(2, 1, 3, fencing.SegmentStride+1, 0), 2)
	var tail []byte
	for i := 4; i <= 5; i++ {
		e := ev("b", i)
		tail = frame.AppendEvent(tail, uint64(i), e.ExecutionID, e.TransactionID, e.Payload)
	}
	bKey := blobtier.TailKey(0, 4, 5)
	if err := b.PutIfAbsent(ctx, bKey, tail, 2); err != nil {
		t.Fatal(err)
	}

	for i := 4; i <= 5; i++ {
		if _, err := st.Append(ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	err = s.maintain(ctx, false)
	t.Logf("the zombie's maintenance pass: %v (stopped: %v)", err, s.stopped())
	if _, err := b.Stat(ctx, bKey); err != nil {
		t.Fatalf("the new owner's acknowledged tail object %s after the zombie's cleanup: %v", bKey, err)
	}
	if !errors.Is(s.stopped(), ErrFenced) {
		t.Fatalf("the zombie is not fenced after its pass: %v", s.stopped())
	}
}
