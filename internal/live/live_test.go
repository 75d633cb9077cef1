package live_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
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

// txn numbers the events, so each append is a new event and not a retry
// of an earlier one (retry-safe appends).
var txn atomic.Uint64

func ev(p string) localseg.Event {
	return localseg.Event{ExecutionID: "7", TransactionID: fmt.Sprintf("t-%s-%d", p, txn.Add(1)), Payload: p}
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

// TestHubBoundedAndNeverWaits: a subscriber that takes nothing does not
// hold the appends back; its buffer fills to its bound and it is ended
// with ErrOverflow, holding exactly the bound; a subscriber that keeps
// taking gets every record once, in order; once both left the hub's
// goroutine ends.
func TestHubBoundedAndNeverWaits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	scan := func(after uint64, limit int) ([]localseg.Record, bool, error) {
		p, cut, err := st.ScanBytes(after, limit, 0)
		return p.Records, cut, err
	}
	h := live.NewHub(st, scan, func(r localseg.Record) []byte { return []byte(r.Payload) }, 10, 1<<20)
	stalled, _ := h.Join(0, "")
	reader, _ := h.Join(0, "")
	if stalled == nil || reader == nil {
		t.Fatal("join refused at the hub's position")
	}
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	var got []uint64
	done := make(chan error, 1)
	progress := make(chan int, 100)
	go func() {
		for len(got) < 100 {
			items, err := reader.Take()
			for _, it := range items {
				got = append(got, it.Seq)
				progress <- len(got)
			}
			if err != nil {
				done <- err
				return
			}
			if len(got) < 100 {
				select {
				case <-reader.Ready():
				case <-ctx.Done():
					done <- ctx.Err()
					return
				}
			}
		}
		done <- nil
	}()
	// One append at a time, each taken by the reader before the next (so
	// the reader never falls 10 behind, whatever the machine's speed).
	for i := 1; i <= 100; i++ {
		if _, err := st.Append(ev("x")); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-progress:
			if n != i {
				t.Fatalf("reader at %d after append %d", n, i)
			}
		case err := <-done:
			t.Fatalf("reader ended at append %d: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("reader got %v", got)
		}
	}
	var items []live.Item
	var err error
	for !errors.Is(err, live.ErrOverflow) {
		select {
		case <-stalled.Ready():
		case <-ctx.Done():
			t.Fatalf("the stalled subscriber holds %d records and was never ended: its buffer is unbounded", len(items))
		}
		var more []live.Item
		more, err = stalled.Take()
		items = append(items, more...)
	}
	if len(items) != 10 || items[0].Seq != 1 || items[9].Seq != 10 {
		t.Fatalf("the stalled subscriber held %d records (%v), want its bound of 10", len(items), items)
	}
	h.Leave(stalled)
	h.Leave(reader)
	h.Wait()
}
