package tailbatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// hangGuard bounds waits that only a bug could make long.
const hangGuard = time.Minute

// driverPass is the lock-released driver shape: Prepare (the store's brief
// lock only), Upload of each batch with no lock at all, then Commit or Fail.
func driverPass(ctx context.Context, r *tailbatch.Replicator, s tailbatch.Source, b tailbatch.Putter) error {
	batches, err := r.Prepare(s)
	if err != nil {
		return err
	}
	for _, bt := range batches {
		if err := tailbatch.Upload(ctx, b, s, bt); err != nil {
			r.Fail(bt, err)
			return err
		}
		if err := r.Commit(bt); err != nil {
			return err
		}
	}
	return nil
}

// CHECKLIST §4.10: the lock-released driver shape replicates everything,
// while several goroutines append to the store at the same time (run under
// -race). Recovery from the bucket is checked by decoding every object.
func TestDriverShapeReplicatesEverythingUnderConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{SegmentMaxBytes: 16 << 10})
	b := newMemBucket(t)
	r := tailbatch.New(0, 0, tailbatch.Options{})

	const writers, perWriter = 4, 150
	var appends sync.WaitGroup
	stop := make(chan struct{})
	driverDone := make(chan error, 1)
	var passes atomic.Int64
	go func() {
		for {
			if err := driverPass(ctx, r, s, b); err != nil {
				driverDone <- err
				return
			}
			passes.Add(1)
			// A short pause keeps the loop from spinning on a shared
			// machine; passes still interleave with the appends.
			time.Sleep(200 * time.Microsecond)
			select {
			case <-stop:
				driverDone <- nil
				return
			default:
			}
		}
	}()
	errs := make(chan error, writers)
	for w := range writers {
		appends.Add(1)
		go func() {
			defer appends.Done()
			for i := range perWriter {
				if _, err := s.Append(localseg.Event{
					ExecutionID:   fmt.Sprintf("%d", 100+w),
					TransactionID: fmt.Sprintf("txn-%d-%d", w, i),
					Payload:       fmt.Sprintf("writer %d event %d", w, i),
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	appends.Wait()
	close(stop)
	if err := <-driverDone; err != nil {
		t.Fatalf("driver: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	// A last pass ships whatever arrived after the loop's final Prepare.
	if err := driverPass(ctx, r, s, b); err != nil {
		t.Fatalf("final pass: %v", err)
	}
	tip := s.Tip()
	if tip != writers*perWriter || r.ShippedThrough() != tip {
		t.Fatalf("tip %d, shipped %d; want %d", tip, r.ShippedThrough(), writers*perWriter)
	}
	got := bucketEvents(t, ctx, b, 0)
	if m := missing(got, tip); len(m) != 0 || len(got) != int(tip) {
		t.Fatalf("bucket holds %d events, missing %v", len(got), m)
	}
	for seq := uint64(1); seq <= tip; seq++ {
		rec, err := s.Get(seq)
		if err != nil || rec.Payload != got[seq] {
			t.Fatalf("sequence %d: local %q (%v), bucket %q", seq, rec.Payload, err, got[seq])
		}
	}
	t.Logf("%d driver passes, %d tail objects", passes.Load(), r.Stats().Batches)
}

// A slow bucket never slows appends: while an upload is blocked inside the
// bucket, appends keep completing (they need only the store's own brief
// lock), and the blocked pass finishes once the bucket answers.
func TestBlockedUploadDoesNotBlockAppends(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	r := tailbatch.New(0, 0, tailbatch.Options{})
	appendN(t, s, 5)

	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	b.setBefore(func(op, key string) error {
		if op == opPutIfAbsent {
			once.Do(func() { close(entered) })
			<-release
		}
		return nil
	})
	passDone := make(chan error, 1)
	go func() {
		_, err := r.Replicate(ctx, s, b)
		passDone <- err
	}()
	select {
	case <-entered:
	case <-time.After(hangGuard):
		t.Fatal("the upload never reached the bucket")
	}

	// The put is blocked now. Appends, reads and even a second Prepare must
	// all complete meanwhile.
	appended := make(chan error, 1)
	go func() {
		for i := range 50 {
			if _, err := s.Append(event(1000+i, "while blocked")); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("append while an upload is blocked: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("appends did not complete while an upload was blocked")
	}
	prepared := make(chan error, 1)
	go func() {
		batches, err := r.Prepare(s)
		if err == nil && len(batches) == 0 {
			err = errors.New("no batch")
		}
		prepared <- err
	}()
	select {
	case err := <-prepared:
		if err != nil {
			t.Fatalf("prepare while an upload is blocked: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("prepare did not complete while an upload was blocked")
	}
	select {
	case err := <-passDone:
		t.Fatalf("the pass finished (%v) while its put was still blocked", err)
	default:
	}
	if got := s.Tip(); got != 55 {
		t.Fatalf("tip = %d, want 55", got)
	}

	close(release)
	select {
	case err := <-passDone:
		if err != nil {
			t.Fatalf("blocked pass: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the pass never finished")
	}
	if r.ShippedThrough() != 5 {
		t.Fatalf("the blocked pass shipped through %d, want 5", r.ShippedThrough())
	}
	b.setBefore(nil)
	if _, err := r.Replicate(ctx, s, b); err != nil || r.ShippedThrough() != 55 {
		t.Fatalf("next pass: %v, shipped %d", err, r.ShippedThrough())
	}
}

// A refusing bucket never fails an append, even with a driver hammering it.
func TestRefusingBucketNeverFailsAppends(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{SegmentMaxBytes: 8 << 10})
	b := newTestBucket(newMemBucket(t))
	b.setBefore(refuseAll)
	r := tailbatch.New(0, 0, tailbatch.Options{})
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		failures := 0
		for {
			if err := driverPass(ctx, r, s, b); err != nil {
				if !errors.Is(err, errRefused) {
					t.Errorf("driver: unexpected %v", err)
				}
				failures++
			}
			time.Sleep(200 * time.Microsecond)
			select {
			case <-stop:
				done <- failures
				return
			default:
			}
		}
	}()
	tip := appendN(t, s, 200)
	close(stop)
	failures := <-done
	if tip != 200 || r.ShippedThrough() != 0 {
		t.Fatalf("tip %d, shipped %d", tip, r.ShippedThrough())
	}
	if st := r.Stats(); st.Failed != uint64(failures) || st.Batches != 0 {
		t.Fatalf("stats %+v, driver saw %d failures", st, failures)
	}
}
