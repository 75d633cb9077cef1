package tailbatch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// slowPlainStore is a bucket without compare-and-swap (mem://, file://)
// whose reads take a moment, so two writers' read-then-put steps overlap;
// it records the shipped_through of every cursor object put.
type slowPlainStore struct {
	*casStore
	mu      sync.Mutex
	shipped []uint64
}

func (s *slowPlainStore) GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error) {
	data, ver, err := s.casStore.GetVersioned(ctx, key)
	time.Sleep(200 * time.Microsecond)
	return data, ver, err
}

func (s *slowPlainStore) Put(ctx context.Context, key string, data []byte) error {
	c, err := tailbatch.DecodeCursor(data)
	if err != nil {
		return err
	}
	// Record under the same lock as the put, so the order recorded is the
	// order the bucket saw.
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.casStore.Put(ctx, key, data); err != nil {
		return err
	}
	s.shipped = append(s.shipped, c.ShippedThrough)
	return nil
}

// On a bucket without compare-and-swap, concurrent SyncCursor calls of one
// replicator are serialised: no put carries a lower shipped_through than
// the one before it.
func TestSyncCursorPlainPutNeverMovesBackward(t *testing.T) {
	ctx := context.Background()
	store := &slowPlainStore{casStore: newCASStore()}
	store.noCAS = true
	r := tailbatch.New(0, 0, tailbatch.Options{})
	var next atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				r.Advance(next.Add(1))
				if _, err := r.SyncCursor(ctx, store, map[string]uint64{"c": 1}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	for i := 1; i < len(store.shipped); i++ {
		if store.shipped[i] < store.shipped[i-1] {
			t.Fatalf("put %d wrote shipped_through %d after %d: %v", i, store.shipped[i], store.shipped[i-1], fmt.Sprint(store.shipped[max(0, i-5):i+1]))
		}
	}
}

// snapHookSource is a store whose Snapshot runs after once, right after it
// took the snapshot: what a concurrent pass does between the two reads.
type snapHookSource struct {
	*localseg.Store
	after func()
}

func (s *snapHookSource) Snapshot() (localseg.Snapshot, error) {
	snap, err := s.Store.Snapshot()
	if f := s.after; f != nil {
		s.after = nil
		f()
	}
	return snap, err
}

// The cursor object's shipped_through is the position read before its
// consumers snapshot: a consumer created after the snapshot, whose frame a
// concurrent pass ships meanwhile, must stay above shipped_through, where
// a restore still finds it in the tail objects (a restore trusts the
// object's consumers for every frame up to shipped_through).
func TestCursorPositionIsReadBeforeTheConsumers(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, localseg.Options{})
	b := newMemBucket(t)
	r := tailbatch.New(0, 0, tailbatch.Options{})
	tip := appendN(t, st, 5)
	src := &snapHookSource{Store: st}
	src.after = func() {
		if _, err := st.Pull("late", 1); err != nil {
			t.Error(err)
		}
		r.Advance(appendN(t, st, 3)) // a concurrent pass shipped them
	}
	res, err := r.Replicate(ctx, src, b)
	if err != nil || !res.CursorWritten {
		t.Fatalf("pass = %+v, %v", res, err)
	}
	c, _, err := tailbatch.ReadCursor(ctx, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Consumers["late"]; c.ShippedThrough != tip || ok {
		t.Fatalf("cursor object = %+v; want shipped_through %d (read before the snapshot) and no consumer late", c, tip)
	}
}

// An ack with nothing new to ship makes the cursor object due: the pass
// writes it once, with the new consumer position, and the next pass with
// nothing new issues no request.
func TestAckAloneWritesTheCursorObjectOnce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	r := tailbatch.New(0, 0, tailbatch.Options{})
	tip := appendN(t, st, 5)
	if _, err := st.Pull("c", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Replicate(ctx, st, b); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ack("c", 3); err != nil {
		t.Fatal(err)
	}
	before := b.total()
	res, err := r.Replicate(ctx, st, b)
	if err != nil || res.Prepared != 0 || !res.CursorWritten {
		t.Fatalf("pass after an ack = %+v, %v; want the cursor object written", res, err)
	}
	c, _, err := tailbatch.ReadCursor(ctx, b, 0)
	if err != nil || c.ShippedThrough != tip || c.Consumers["c"] != 3 {
		t.Fatalf("cursor object = %+v, %v; want shipped_through %d and c at 3", c, err, tip)
	}
	mid := b.total()
	if mid == before {
		t.Fatal("the cursor object write made no request")
	}
	res, err = r.Replicate(ctx, st, b)
	if err != nil || res.CursorWritten || b.total() != mid {
		t.Fatalf("idle pass = %+v, %v, %d requests; want none", res, err, b.total()-mid)
	}
}
