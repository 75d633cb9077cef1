package bucketlog

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// Finding 14b: Close releases every synchronous waiter at once, with
// ErrNotInBucket, and leaves no goroutine behind.
func TestCloseReleasesSyncWaiters(t *testing.T) {
	for _, bg := range []bool{true, false} {
		name := "background"
		if !bg {
			name = "no-background"
		}
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			ctx := ctxT(t)
			fb := faultbucket.New(memblob.OpenBucket(nil), 1)
			b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: time.Second})
			defer b.Close()
			l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, SyncToBucket: true, SyncWait: time.Minute,
				ShutdownShipTimeout: time.Second, NoBackground: !bg, Logger: quiet()})
			fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal})
			const n = 8
			errs := make(chan error, n)
			for i := range n {
				go func() {
					_, err := l.Append(ctx, ev("6", i))
					errs <- err
				}()
			}
			// Let every append reach its wait.
			deadline := time.Now().Add(10 * time.Second)
			for l.store.Tip() < n && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			l.Close()
			for range n {
				select {
				case err := <-errs:
					if !errors.Is(err, ErrNotInBucket) {
						t.Errorf("waiter released by Close: %v, want ErrNotInBucket", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("a synchronous waiter was still waiting 10s after Close (SyncWait is 1 min)")
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("waiters released %s after Close", d)
			}
		})
	}
}

// Close ends the waits on the tip (Wait, Follow, PullWait) at once, before
// its last shipment, not after it: with that shipment hanging in the
// bucket, a Wait returns ErrClosed long before ShutdownShipTimeout ends the
// shipment. A synchronous append waiting is answered after that shipment
// (ErrNotInBucket: it did not reach the bucket), as doc.go says.
func TestCloseEndsTipWaitsBeforeHangingShipment(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: time.Minute})
	defer b.Close()
	const shutdown = 10 * time.Second
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, SyncToBucket: true, SyncWait: time.Minute,
		ShutdownShipTimeout: shutdown, Logger: quiet()})
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Delay, Delay: time.Minute})
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, ev("7", 0))
		appended <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for l.store.Tip() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := l.Wait(ctx, 1)
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond)
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	select {
	case err := <-waited:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Wait released by Close: %v, want ErrClosed", err)
		}
	case <-time.After(shutdown / 2):
		t.Errorf("Wait still waiting %s after Close began (the last shipment hangs; ShutdownShipTimeout %s)", shutdown/2, shutdown)
	}
	select {
	case err := <-appended:
		if !errors.Is(err, ErrNotInBucket) {
			t.Errorf("synchronous append released by Close: %v, want ErrNotInBucket", err)
		}
	case <-time.After(shutdown + 10*time.Second):
		t.Fatalf("the synchronous append was still waiting after ShutdownShipTimeout (SyncWait is 1 min)")
	}
	<-closed
}
