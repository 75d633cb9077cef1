package live_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog/internal/live"
	"github.com/bucketlog/bucketlog/localseg"
)

// TestHubPublishesEarlyBeforeTheBound: the gap coalesces wake-ups, it
// must not end a subscriber that keeps up. When half a subscriber's
// bound (maxItems) is committed within the gap the hub publishes at
// once, so a subscriber taking every publication is never ended for
// what one gap gathered. With a gap of an hour a hub that waited it out
// would deliver nothing here (or, woken at last, end the subscriber).
func TestHubPublishesEarlyBeforeTheBound(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	scan := func(after uint64, limit int) ([]localseg.Record, bool, error) {
		p, cut, err := st.ScanBytes(after, limit, 0)
		return p.Records, cut, err
	}
	const bound = 10
	h := live.NewHub(st, scan, func(r localseg.Record) []byte { return []byte(r.Payload) }, bound, 1<<20)
	h.MinGap, h.GapPerSub, h.MaxGap = time.Hour, 0, 0
	s, ctx, leave := joinWhole(t, h)
	defer leave()
	var last uint64
	take := func() {
		t.Helper()
		select {
		case <-s.Ready():
		case <-ctx.Done():
			t.Fatalf("after %d: records committed within the gap, half the bound, were not published", last)
		}
		items, err := s.Take()
		if err != nil {
			t.Fatalf("after %d: %v (took %d)", last, err, len(items))
		}
		for _, it := range items {
			if it.Seq != last+1 {
				t.Fatalf("took %d after %d", it.Seq, last)
			}
			last = it.Seq
		}
	}
	if _, err := st.Append(ev("first")); err != nil {
		t.Fatal(err)
	}
	take() // the first after a quiet spell: at once
	for round := range 4 {
		for i := range bound / 2 {
			if _, err := st.Append(ev(fmt.Sprint("r", round, "-", i))); err != nil {
				t.Fatal(err)
			}
		}
		for last < uint64(1+(round+1)*bound/2) {
			take()
		}
	}
}

// quietSource is a Source whose commit channels never close: every commit
// it reports lands before the hub takes its next channel (a fast disk's
// group commits overtaking the hub's goroutine).
type quietSource struct {
	mu  sync.Mutex
	tip uint64
}

func (q *quietSource) Tip() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.tip
}

func (q *quietSource) TipChanged() (<-chan struct{}, error) { return make(chan struct{}), nil }

// TestHubCountsCommitsBeforeItsWait: half a bound committed at once, all
// of it before the hub waits for the next commit, is published at once
// too, not after the gap (an hour here). The early check used to follow
// only the commits during the wait, so on a fast disk (TMPDIR on tmpfs)
// TestHubPublishesEarlyBeforeTheBound waited out its whole timeout.
func TestHubCountsCommitsBeforeItsWait(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const bound = 10
	src := &quietSource{tip: 1}
	scan := func(after uint64, limit int) ([]localseg.Record, bool, error) {
		var recs []localseg.Record
		for s := after + 1; s <= src.Tip() && len(recs) < limit; s++ {
			recs = append(recs, localseg.Record{Seq: s, Payload: fmt.Sprint(s)})
		}
		if after == 0 { // the first publication: then half a bound commits at once
			src.mu.Lock()
			src.tip += bound / 2
			src.mu.Unlock()
		}
		return recs, false, nil
	}
	h := live.NewHub(src, scan, func(r localseg.Record) []byte { return []byte(r.Payload) }, bound, 1<<20)
	h.MinGap, h.GapPerSub, h.MaxGap = time.Hour, 0, 0
	s, ctx, leave := joinWhole(t, h)
	defer leave()
	var last uint64
	for last < 1+bound/2 {
		select {
		case <-s.Ready():
		case <-ctx.Done():
			t.Fatalf("after %d: half a bound committed before the hub's wait was not published", last)
		}
		items, err := s.Take()
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			last = it.Seq
		}
	}
}

// TestHubSplitsAPublicationAtHalfTheBound: a hub that fell behind by more
// than a subscriber's bound (a burst committed at once) publishes half a
// bound at a time, of records and of bytes, so a subscriber that takes
// every publication gets the whole burst. It used to publish up to 16
// pages at once and end the subscriber with ErrOverflow on its first
// take. The scan waits for each take, so the hub cannot run ahead of the
// subscriber here.
func TestHubSplitsAPublicationAtHalfTheBound(t *testing.T) {
	const burst = 30
	for _, c := range []struct{ items, bytes int }{{10, 1 << 20}, {1000, 20}} {
		t.Run(fmt.Sprint(c.items, " records, ", c.bytes, " bytes"), func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			src := &quietSource{tip: burst}
			turn, done := make(chan struct{}, 1), make(chan struct{})
			turn <- struct{}{}
			scan := func(after uint64, limit int) ([]localseg.Record, bool, error) {
				select {
				case <-turn:
				case <-done:
				}
				var recs []localseg.Record
				for s := after + 1; s <= src.Tip() && len(recs) < limit; s++ {
					recs = append(recs, localseg.Record{Seq: s, Payload: fmt.Sprint(s)})
				}
				return recs, false, nil
			}
			h := live.NewHub(src, scan, func(r localseg.Record) []byte { return []byte(r.Payload) }, c.items, c.bytes)
			h.MinGap, h.GapPerSub, h.MaxGap = time.Hour, 0, 0
			s, ctx, leave := joinWhole(t, h)
			defer leave()
			defer close(done) // first: a scan waiting for its turn lets the hub end
			var last uint64
			for last < burst {
				select {
				case <-s.Ready():
				case <-ctx.Done():
					t.Fatalf("after %d: the burst was not published", last)
				}
				items, err := s.Take()
				if err != nil {
					t.Fatalf("after %d: %v (took %d): one publication held more than the subscriber may", last, err, len(items))
				}
				n := 0
				for _, it := range items {
					if it.Seq != last+1 {
						t.Fatalf("took %d after %d", it.Seq, last)
					}
					last, n = it.Seq, n+len(it.Frame)
				}
				if len(items) > c.items || n > c.bytes {
					t.Fatalf("one publication of %d records, %d bytes; the bound is %d, %d bytes", len(items), n, c.items, c.bytes)
				}
				turn <- struct{}{}
			}
		})
	}
}

// joinWhole joins h as a whole-log subscriber at its start and returns it
// with a context bounded by long, and leave: cancel, leave, and wait for
// the hub's goroutine (before goleak looks).
func joinWhole(t *testing.T, h *live.Hub) (*live.Sub, context.Context, func()) {
	t.Helper()
	s, _ := h.Join(0, "")
	if s == nil {
		t.Fatal("join refused at the hub's position")
	}
	ctx, cancel := context.WithTimeout(context.Background(), long)
	return s, ctx, func() {
		cancel()
		h.Leave(s)
		h.Wait()
	}
}
