package live_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog/internal/live"
	"github.com/bucketlog/bucketlog/localseg"
)

// TestHubRunsShareOnePublication: a publication's frames lie in one
// block shared by every whole-log subscriber, so a subscriber writes
// what it took as one run per publication, the same memory for all of
// them (no per-subscriber copy); a take spanning two publications is two
// runs; an execution's subscriber, whose records are not adjacent, gets
// runs that still spell exactly its frames. Each case compares the runs
// with the frames byte for byte.
func TestHubRunsShareOnePublication(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := open(t)
	scan := func(after uint64, limit int) ([]localseg.Record, bool, error) {
		p, cut, err := st.ScanBytes(after, limit, 0)
		return p.Records, cut, err
	}
	h := live.NewHub(st, scan, func(r localseg.Record) []byte { return fmt.Appendf(nil, "%d:%s;", r.Seq, r.Payload) }, 100, 1<<20)
	h.MinGap, h.GapPerSub, h.MaxGap = 0, 0, 0
	a, _ := h.Join(0, "")
	b, _ := h.Join(0, "")
	c, _ := h.Join(0, "7")
	if a == nil || b == nil || c == nil {
		t.Fatal("join refused at the hub's position")
	}
	defer h.Wait()
	defer h.Leave(c)
	defer h.Leave(b)
	defer h.Leave(a)
	ctx, cancel := context.WithTimeout(context.Background(), long)
	defer cancel()
	batch := func(p string) {
		var evs []localseg.Event
		for i := range 5 {
			e := ev(fmt.Sprint(p, i))
			if i%2 == 1 {
				e.ExecutionID = "8"
			}
			evs = append(evs, e)
		}
		if _, _, err := st.AppendBatch(evs); err != nil {
			t.Fatal(err)
		}
	}
	take := func(s *live.Sub, want int) ([]live.Item, [][]byte) {
		t.Helper()
		select {
		case <-s.Ready():
		case <-ctx.Done():
			t.Fatal("not published")
		}
		items, err := s.Take()
		if err != nil || len(items) != want {
			t.Fatalf("took %d items, %v; want %d", len(items), err, want)
		}
		var runs [][]byte
		for run := range live.Runs(items) {
			runs = append(runs, run)
		}
		var frames []byte
		for _, it := range items {
			frames = append(frames, it.Frame...)
		}
		if got := bytes.Join(runs, nil); !bytes.Equal(got, frames) {
			t.Fatalf("runs spell %q, the frames %q", got, frames)
		}
		return items, runs
	}
	batch("x")
	_, ra := take(a, 5)
	_, rb := take(b, 5)
	if len(ra) != 1 || len(rb) != 1 || &ra[0][0] != &rb[0][0] {
		t.Fatalf("one publication took as %d and %d runs (shared: %v), want one shared run", len(ra), len(rb), len(ra) > 0 && len(rb) > 0 && &ra[0][0] == &rb[0][0])
	}
	take(c, 3)
	batch("y")
	take(b, 5) // the second publication happened
	take(c, 3)
	batch("z")
	take(b, 5)
	if _, r := take(a, 10); len(r) != 2 {
		t.Fatalf("a take of two publications is %d runs, want 2", len(r))
	}
	take(c, 3)
}
