package tailbatch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
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
