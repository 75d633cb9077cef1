package bucketlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// longWait bounds waits that only a missed wake-up lets run out; the
// tests fail when one does (the empty answer), they never time anything.
const longWait = 2 * time.Minute

// TestWaitWokenByAppendAndReleasedByClose: Log.Wait returns the tip the
// append made (a wait of minutes, so a waiter woken only by its timer
// fails here), a PullWait returns the appended record, and Close ends a
// pending wait at once with ErrClosed; no goroutine is left.
func TestWaitWokenByAppendAndReleasedByClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := ctxT(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Logger: quiet()})
	if _, err := l.Append(ctx, ev("6", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Pull(ctx, "c", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "c", 1); err != nil {
		t.Fatal(err)
	}
	tips := make(chan uint64, 1)
	pulled := make(chan PullResult, 1)
	go func() {
		tip, err := l.Wait(ctx, 1)
		if err != nil {
			t.Error(err)
		}
		tips <- tip
	}()
	go func() {
		res, err := l.PullWait(ctx, "c", 10, longWait)
		if err != nil {
			t.Error(err)
		}
		pulled <- res
	}()
	time.Sleep(100 * time.Millisecond) // let them park (the test holds either way)
	if _, err := l.Append(ctx, ev("6", 1)); err != nil {
		t.Fatal(err)
	}
	if tip := <-tips; tip != 2 {
		t.Fatalf("Wait returned tip %d, want 2", tip)
	}
	if res := <-pulled; len(res.Records) != 1 || res.Records[0].Seq != 2 {
		t.Fatalf("PullWait answered %+v, want record 2", res)
	}
	if res, err := l.PullWait(ctx, "c", 10, 50*time.Millisecond); err != nil || len(res.Records) != 1 {
		t.Fatalf("nothing acked: the pull answers at once %+v %v", res, err)
	}

	errs := make(chan error, 2)
	go func() { _, err := l.Wait(context.Background(), 2); errs <- err }()
	go func() {
		for _, err := range l.Follow(context.Background(), 2) {
			errs <- err
			return
		}
	}()
	time.Sleep(100 * time.Millisecond)
	l.Close()
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("a wait at Close ended with %v, want ErrClosed", err)
		}
	}
	if _, err := l.Wait(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}

// TestFollowLive: Follow yields the history, then records appended while
// it waits, in order; cancelling its context ends it with the error.
func TestFollowLive(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l := mustOpen(t, Options{Dir: t.TempDir(), Logger: quiet()})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), longWait)
	defer cancel()
	for i := range 3 {
		if _, err := l.Append(ctx, ev("6", i)); err != nil {
			t.Fatal(err)
		}
	}
	want := uint64(2)
	for r, err := range l.Follow(ctx, 1) {
		if err != nil {
			t.Fatalf("at %d: %v", want, err)
		}
		if r.Seq != want {
			t.Fatalf("got %d, want %d", r.Seq, want)
		}
		if want == 3 {
			go l.Append(ctx, ev("6", 9))
		}
		if want == 4 {
			break
		}
		want++
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	for _, err := range l.Follow(cctx, 4) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Follow: %v", err)
		}
	}
}
