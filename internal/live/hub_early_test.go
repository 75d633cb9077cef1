package live_test

import (
	"context"
	"fmt"
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
	s, _ := h.Join(0, "")
	if s == nil {
		t.Fatal("join refused at the hub's position")
	}
	defer h.Wait()
	defer h.Leave(s)
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
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
