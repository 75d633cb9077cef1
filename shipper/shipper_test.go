package shipper_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/shipper"
)

func open(t *testing.T, dir string) *localseg.Store {
	t.Helper()
	st, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// txn numbers the events appendN writes, so a second call appends new
// events rather than retries of the first call's (retry-safe appends).
var txn atomic.Uint64

func appendN(t *testing.T, st *localseg.Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := st.Append(localseg.Event{ExecutionID: "e", TransactionID: fmt.Sprintf("t%d", txn.Add(1)), Payload: `{"n":1}`}); err != nil {
			t.Fatal(err)
		}
	}
}

func opts() shipper.Options {
	return shipper.Options{TailReplication: true, TailInterval: time.Second, SyncWait: time.Second, StartupTimeout: time.Second, UploadRetryMax: time.Second}
}

// A shipper over a store and a bucket ships everything with one pass, and
// a second shipper started over the same store and bucket finds it all
// durable (no back-pointer to a Log: the store, the bucket and the options
// are all it takes).
func TestShipThenReconcile(t *testing.T) {
	ctx := context.Background()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer b.Close()
	dir := t.TempDir()
	st := open(t, dir)
	appendN(t, st, 60)
	s, err := shipper.New(ctx, st, b, opts())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Ship(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ShippedThrough != st.Tip() || rep.Upload.Uploaded == 0 {
		t.Fatalf("ship: %+v, tip %d", rep, st.Tip())
	}
	s2, err := shipper.New(ctx, st, b, opts())
	if err != nil {
		t.Fatal(err)
	}
	rec := s2.Reconciled()
	if rec.ShippedThrough != st.Tip() || rec.BucketTip != st.Tip() || rec.DurableSegments != rep.Upload.Uploaded {
		t.Fatalf("reconciled %+v after %+v", rec, rep)
	}
	if err := s2.Health(); err != nil {
		t.Fatal(err)
	}
	// The shared GC pass needs a bucket that can compare-and-swap.
	if _, err := s2.GC(ctx, reclaim.Policy{Enabled: true}, false); !errors.Is(err, shipper.ErrUsage) {
		t.Fatalf("GC on a bucket without compare-and-swap: %v", err)
	}
}

// A store the bucket is ahead of is refused at start, as a stale disk.
func TestStaleDiskRefused(t *testing.T) {
	ctx := context.Background()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer b.Close()
	st := open(t, t.TempDir())
	appendN(t, st, 10)
	s, err := shipper.New(ctx, st, b, opts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := shipper.New(ctx, open(t, t.TempDir()), b, opts()); !errors.Is(err, shipper.ErrStaleDisk) {
		t.Fatalf("an empty disk under a bucket that holds events: %v", err)
	}
}

// The local GC reclaims sealed segments of a store without a bucket.
func TestLocalGC(t *testing.T) {
	st := open(t, t.TempDir())
	appendN(t, st, 200)
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	rep, err := shipper.NewLocal(st, shipper.Options{}).GC(reclaim.Policy{Enabled: true, MinRetainedSegments: 1, MaxRetainedSegments: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != "reclaimed" || rep.SegmentsAfter >= rep.SegmentsBefore {
		t.Fatalf("local GC: %+v", rep)
	}
}

// refuseLaterTails accepts the first tail object put and refuses every
// later one, and counts the cursor object writes.
type refuseLaterTails struct {
	blobtier.Bucket
	tails, cursorWrites int
}

var errRefused = errors.New("refused by the test")

func (b *refuseLaterTails) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	if k, err := blobtier.ParseKey(key); err == nil && k.Kind == blobtier.KindTail {
		b.tails++
		if b.tails > 1 {
			return errRefused
		}
	}
	if key == blobtier.CursorKey(0) {
		b.cursorWrites++
	}
	return b.Bucket.PutIfAbsent(ctx, key, data, epoch)
}

func (b *refuseLaterTails) Put(ctx context.Context, key string, data []byte) error {
	if key == blobtier.CursorKey(0) {
		b.cursorWrites++
	}
	return b.Bucket.Put(ctx, key, data)
}

func (b *refuseLaterTails) CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error {
	if key == blobtier.CursorKey(0) {
		b.cursorWrites++
	}
	return b.Bucket.CompareAndSwap(ctx, key, data, expect)
}

// A tail pass that stops at a failed batch writes no cursor object, even
// though an earlier batch of the pass committed: the cursor object waits
// for a pass that shipped everything it prepared.
func TestFailedTailPassWritesNoCursorObject(t *testing.T) {
	ctx := context.Background()
	mem := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer mem.Close()
	b := &refuseLaterTails{Bucket: mem}
	st := open(t, t.TempDir())
	s, err := shipper.New(ctx, st, b, opts())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, st, 60) // several segments: several batches in one pass
	if err := s.ShipTail(ctx); !errors.Is(err, errRefused) {
		t.Fatalf("tail pass: %v, want the refusal", err)
	}
	if shipped := s.ShippedThrough(); shipped == 0 || shipped >= st.Tip() {
		t.Fatalf("shipped through %d of %d: want the first batch only", shipped, st.Tip())
	}
	if b.cursorWrites != 0 {
		t.Fatalf("a failed pass wrote the cursor object %d times", b.cursorWrites)
	}
	b.tails = -100 // accept the rest
	if err := s.ShipTail(ctx); err != nil || s.ShippedThrough() != st.Tip() || b.cursorWrites != 1 {
		t.Fatalf("next pass: %v, shipped %d of %d, %d cursor writes", err, s.ShippedThrough(), st.Tip(), b.cursorWrites)
	}
}
