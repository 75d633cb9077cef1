package live_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog/internal/live"
	"github.com/bucketlog/bucketlog/localseg"
)

// long is a wait bound only a missed wake-up reaches: the tests never
// depend on it passing, only on an answer arriving before it.
const long = 2 * time.Minute

func open(t *testing.T) *localseg.Store {
	t.Helper()
	st, err := localseg.Open(filepath.Join(t.TempDir(), "s"), localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func ev(p string) localseg.Event {
	return localseg.Event{ExecutionID: "7", TransactionID: "t-" + p, Payload: p}
}

// TestUntilWokenByCommit: a wait of minutes answers with the appended
// record; were waiters woken only by the timer it would answer the empty
// page, which the test refuses.
func TestUntilWokenByCommit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	if _, err := st.Append(ev("a")); err != nil {
		t.Fatal(err)
	}
	type out struct {
		p   localseg.Page
		err error
	}
	got := make(chan out, 1)
	started := make(chan struct{})
	go func() {
		var once bool
		p, err := live.Until(context.Background(), st, long, func() (localseg.Page, bool, error) {
			p, err := st.Scan(1, 10)
			if !once {
				once = true
				close(started)
			}
			return p, len(p.Records) > 0, err
		})
		got <- out{p, err}
	}()
	<-started
	if _, err := st.Append(ev("b")); err != nil {
		t.Fatal(err)
	}
	o := <-got
	if o.err != nil || len(o.p.Records) != 1 || o.p.Records[0].Payload != "b" {
		t.Fatalf("wait answered %+v, %v; want record 2 (b)", o.p, o.err)
	}
}

func TestUntilTimeoutAnswersEmpty(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	n := 0
	p, err := live.Until(context.Background(), st, 50*time.Millisecond, func() (localseg.Page, bool, error) {
		n++
		p, err := st.Scan(0, 10)
		return p, len(p.Records) > 0, err
	})
	if err != nil || len(p.Records) != 0 || n != 1 {
		t.Fatalf("timeout answered %+v, %v after %d reads; want the empty page after 1", p, err, n)
	}
}

func TestWaitCancelledAndReleased(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("client went away")
	done := make(chan error, 1)
	go func() { _, err := live.Wait(ctx, st, 0); done <- err }()
	cancel(why)
	if err := <-done; !errors.Is(err, why) {
		t.Fatalf("cancelled wait: %v, want its cause", err)
	}
	closed := errors.New("engine closed")
	go func() { _, err := live.Wait(context.Background(), live.Closing(st, closed), 0); done <- err }()
	st.ReleaseWaiters()
	if err := <-done; !errors.Is(err, closed) || !errors.Is(err, localseg.ErrClosed) {
		t.Fatalf("released wait: %v, want the closed error", err)
	}
	if _, err := live.Wait(context.Background(), st, 0); !errors.Is(err, localseg.ErrClosed) {
		t.Fatalf("wait after release: %v", err)
	}
}

// TestFollowYieldsHistoryThenLive: history first, then records appended
// while the iterator waits, in order, with no gap.
func TestFollowYieldsHistoryThenLive(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	for i := 0; i < 300; i++ {
		if _, err := st.Append(ev("h")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	var next uint64 = 6
	for r, err := range live.Follow(ctx, st, 5, st.Scan) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != next {
			t.Fatalf("got %d, want %d", r.Seq, next)
		}
		next++
		if r.Seq == 300 {
			go func() {
				for i := 0; i < 3; i++ {
					st.Append(ev("live"))
				}
			}()
		}
		if r.Seq == 303 {
			break
		}
	}
	if next != 304 {
		t.Fatalf("stopped at %d", next)
	}
}
