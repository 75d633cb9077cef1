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
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/watermark"
)

// hiddenClaim answers every HEAD of one claim key "absent" (a HEAD the
// fence check cannot rely on): only the committed rw can then stop a stale
// writer's cleanup.
type hiddenClaim struct {
	blobtier.Bucket
	key string
}

func (h hiddenClaim) Stat(ctx context.Context, key string) (blobtier.ObjectInfo, error) {
	if key == h.key {
		return blobtier.ObjectInfo{}, fmt.Errorf("stat %s: %w", key, blobtier.ErrNotFound)
	}
	return h.Bucket.Stat(ctx, key)
}

// zombieCase says what zombieSetup's new owner B leaves A to find.
type zombieCase struct {
	hideClaim bool // A's HEAD of B's claim answers "absent"
	bumpRW    bool // B committed rw (epoch 2, durable_seq 3)
}

// zombieSetup: A owns epoch 1 and shipped 1..3; B claimed epoch 2, cut at
// 3 (bumped rw when zc.bumpRW) and shipped its acknowledged 4..5 as a tail
// object; A appends its own 4..5 and seals, so its local contiguous durable
// end (5 after the upload) is ahead of the committed 3. It returns A, the
// bucket as it is, and the key of B's tail object.
func zombieSetup(t *testing.T, zc zombieCase) (*Shipper, blobtier.Bucket, string) {
	t.Helper()
	ctx := context.Background()
	raw := blobtier.New(memcas.OpenBucket(nil), blobtier.Options{Timeout: 5 * time.Second})
	t.Cleanup(func() { raw.Close() })
	var b blobtier.Bucket = raw
	if zc.hideClaim {
		b = hiddenClaim{Bucket: raw, key: blobtier.ClaimKey(0, 2)}
	}
	put := func(key string, v interface{ Encode() ([]byte, error) }, epoch uint64) {
		t.Helper()
		data, err := v.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.PutIfAbsent(ctx, key, data, epoch); err != nil {
			t.Fatal(err)
		}
	}
	put(blobtier.ClaimKey(0, 1), fencing.Claim{Epoch: 1, Shard: 0, Owner: "a", Nonce: fencing.NewNonce()}, 1)
	put(blobtier.StartKey(0, 1), fencing.NewStartRecord(1, 0, 0, 0, 0), 1)
	st, err := localseg.Open(t.TempDir(), localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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
	t.Cleanup(func() { s.Close(time.Second) })
	if _, err := s.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	put(blobtier.ClaimKey(0, 2), fencing.Claim{Epoch: 2, Shard: 0, Owner: "b", Nonce: fencing.NewNonce()}, 2)
	put(blobtier.StartKey(0, 2), fencing.NewStartRecord(2, 1, 3, fencing.SegmentStride+1, 0), 2)
	if zc.bumpRW {
		rw := []byte(`{"seq":0,"segment":0,"v":1,"epoch":2,"durable_seq":3}`)
		if err := raw.CompareAndSwap(ctx, blobtier.WatermarkKey(0), rw, ""); err != nil {
			t.Fatal(err)
		}
	}
	var tail []byte
	for i := 4; i <= 5; i++ {
		e := ev("b", i)
		tail = frame.AppendEvent(tail, uint64(i), e.ExecutionID, e.TransactionID, e.Payload)
	}
	bKey := blobtier.TailKey(0, 4, 5)
	if err := raw.PutIfAbsent(ctx, bKey, tail, 2); err != nil {
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
	return s, raw, bKey
}

// TestZombieCleanupBoundIsTheCommittedDurableSeq: the zombie's fence HEAD
// finds nothing (hidden), its local mark 5 is ahead of the committed
// durable_seq 3; its cleanup must still keep B's tail object 4..5 — the
// bound is the committed rw.durable_seq, which the zombie cannot move (rw
// carries epoch 2) — and leave rw as B wrote it.
func TestZombieCleanupBoundIsTheCommittedDurableSeq(t *testing.T) {
	ctx := context.Background()
	s, raw, bKey := zombieSetup(t, zombieCase{hideClaim: true, bumpRW: true})
	err := s.maintain(ctx, false)
	t.Logf("the zombie's maintenance pass: %v (stopped: %v)", err, s.stopped())
	if _, err := raw.Stat(ctx, bKey); err != nil {
		t.Fatalf("the new owner's acknowledged tail object %s after the zombie's cleanup: %v", bKey, err)
	}
	m, _, err := watermark.Read(ctx, raw, 0)
	if err != nil || m.Durable() != 3 {
		t.Fatalf("rw after the zombie's pass: %+v, %v; want durable_seq 3", m, err)
	}
	if !errors.Is(s.stopped(), ErrFenced) {
		t.Fatalf("the zombie is not fenced by rw's epoch: %v", s.stopped())
	}
}

// TestCleanupCommitsDurableSeq: an owner's cleanup commits its contiguous
// durable end to rw (keeping the epoch field) before it deletes the tail
// objects at or below it, and a second pass with nothing new issues no
// request for rw.
func TestCleanupCommitsDurableSeq(t *testing.T) {
	ctx := context.Background()
	raw := blobtier.New(memcas.OpenBucket(nil), blobtier.Options{Timeout: 5 * time.Second})
	defer raw.Close()
	// A legacy rw (no durable_seq, no epoch).
	if err := raw.CompareAndSwap(ctx, blobtier.WatermarkKey(0), []byte(`{"seq":0,"segment":0,"v":4}`), ""); err != nil {
		t.Fatal(err)
	}
	st, err := localseg.Open(t.TempDir(), localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := 1; i <= 3; i++ {
		if _, err := st.Append(localseg.Event{ExecutionID: "a", TransactionID: fmt.Sprint(i), Payload: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{TailReplication: true, TailInterval: time.Hour, SyncWait: time.Second, StartupTimeout: time.Second, UploadRetryMax: time.Second}
	s, err := New(ctx, st, raw, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)
	if _, err := s.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.maintain(ctx, false); err != nil {
		t.Fatal(err)
	}
	m, _, err := watermark.Read(ctx, raw, 0)
	if err != nil || m.Durable() != 3 || m.V != 5 {
		t.Fatalf("rw after the cleanup: %+v, %v; want durable_seq 3 at v 5", m, err)
	}
	for info, err := range raw.List(ctx, 0, blobtier.KindTail) {
		t.Fatalf("a tail object after the cleanup: %s, %v", info.Key, err)
	}
}

// TestDurableSeqRepairNeverBackward: a damaged rw (its durable_seq lost)
// is rewritten by the owner's GC repair with the durable end it last
// committed, by its cleanup with its checked local durable end, and at a
// restart with the contiguous durable end the checks found: never below
// what was committed before the damage.
func TestDurableSeqRepairNeverBackward(t *testing.T) {
	ctx := context.Background()
	raw := blobtier.New(memcas.OpenBucket(nil), blobtier.Options{Timeout: 5 * time.Second})
	defer raw.Close()
	dir := t.TempDir()
	st, err := localseg.Open(dir, localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	n := 0
	appendSeal := func(s *Shipper, k int) {
		t.Helper()
		for range k {
			n++
			if _, err := st.Append(localseg.Event{ExecutionID: "a", TransactionID: fmt.Sprint(n), Payload: `{}`}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Ship(ctx, false); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := s.maintain(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	damage := func() {
		t.Helper()
		if err := raw.Put(ctx, blobtier.WatermarkKey(0), []byte(`{"seq":`)); err != nil {
			t.Fatal(err)
		}
	}
	durable := func(what string, want uint64) {
		t.Helper()
		m, _, err := watermark.Read(ctx, raw, 0)
		if err != nil || m.Durable() < want {
			t.Fatalf("%s: rw %+v, %v; want durable_seq at least %d", what, m, err, want)
		}
	}
	o := Options{TailReplication: true, TailInterval: time.Hour, SyncWait: time.Second, StartupTimeout: time.Second, UploadRetryMax: time.Second}
	s, err := New(ctx, st, raw, o)
	if err != nil {
		t.Fatal(err)
	}
	appendSeal(s, 3)
	durable("after the first cleanup", 3)

	damage()
	if _, err := s.GC(ctx, reclaim.Policy{}, false); err != nil {
		t.Fatal(err)
	}
	durable("after GC's repair", 3)

	damage()
	appendSeal(s, 3)
	durable("after the cleanup's repair", 6)
	for info, err := range raw.List(ctx, 0, blobtier.KindTail) {
		t.Fatalf("a tail object after the repairing cleanup: %s, %v", info.Key, err)
	}
	s.Close(time.Second)

	damage()
	s, err = New(ctx, st, raw, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)
	durable("after the repair at start", 6)
}
