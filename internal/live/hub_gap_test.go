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

// TestHubCoalescesWithinGap: the first commit after a quiet gap is
// published at once; commits within the gap after it wake nobody (one
// wake-up per gap for all of them, not one per commit), and two
// subscribers read the same encoded frame (one encoding per record). A
// hub that published per commit would wake the subscriber at once. The
// gap is MinGap, or GapPerSub per subscriber when longer.
func TestHubCoalescesWithinGap(t *testing.T) {
	t.Run("min", func(t *testing.T) { testHubGap(t, time.Hour, 0) })
	t.Run("per-subscriber", func(t *testing.T) { testHubGap(t, 0, time.Hour) })
	t.Run("capped", func(t *testing.T) { testHubGapCapped(t) })
}

// testHubGapCapped: however many subscribers, the per-subscriber part of
// the gap is capped (MaxGap), so a commit within the gap is still
// delivered, after at most the cap.
func testHubGapCapped(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	scan := func(after uint64, limit int) ([]localseg.Record, bool, error) {
		p, cut, err := st.ScanBytes(after, limit, 0)
		return p.Records, cut, err
	}
	h := live.NewHub(st, scan, func(r localseg.Record) []byte { return []byte(r.Payload) }, 100, 1<<20)
	h.MinGap, h.GapPerSub, h.MaxGap = 0, time.Hour, 20*time.Millisecond
	a, _ := h.Join(0, "")
	if a == nil {
		t.Fatal("join refused at the hub's position")
	}
	defer h.Wait()
	defer h.Leave(a)
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	for i, want := range []uint64{1, 2} {
		if _, err := st.Append(ev(fmt.Sprint("e", i))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Ready():
		case <-ctx.Done():
			t.Fatalf("record %d not delivered: the gap is not capped", want)
		}
		items, err := a.Take()
		if err != nil || len(items) != 1 || items[0].Seq != want {
			t.Fatalf("took %v, %v", items, err)
		}
	}
}

func testHubGap(t *testing.T, minGap, perSub time.Duration) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	scan := func(after uint64, limit int) ([]localseg.Record, bool, error) {
		p, cut, err := st.ScanBytes(after, limit, 0)
		return p.Records, cut, err
	}
	h := live.NewHub(st, scan, func(r localseg.Record) []byte { return []byte(r.Payload) }, 100, 1<<20)
	h.MinGap, h.GapPerSub, h.MaxGap = minGap, perSub, 0
	a, _ := h.Join(0, "")
	b, _ := h.Join(0, "")
	if a == nil || b == nil {
		t.Fatal("join refused at the hub's position")
	}
	defer h.Wait()
	defer h.Leave(b)
	defer h.Leave(a)
	if _, err := st.Append(ev("first")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	take := func(s *live.Sub) []live.Item {
		select {
		case <-s.Ready():
		case <-ctx.Done():
			t.Fatal("the first commit after a quiet spell was not published")
		}
		items, err := s.Take()
		if err != nil || len(items) != 1 || items[0].Seq != 1 {
			t.Fatalf("took %v, %v", items, err)
		}
		return items
	}
	ia, ib := take(a), take(b)
	if &ia[0].Frame[0] != &ib[0].Frame[0] {
		t.Fatal("each subscriber got its own encoding of the record")
	}
	for range 5 {
		if _, err := st.Append(ev("within")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-a.Ready():
		items, _ := a.Take()
		t.Fatalf("woken within the gap with %d records: publication is per commit", len(items))
	case <-time.After(200 * time.Millisecond):
	}
}
