package sections

import (
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

func tierPage3(x int) bucketlog.Page {
	var p bucketlog.Page
	for i := range tierBlock {
		p.Records = append(p.Records, bucketlog.Record{Seq: uint64(x*tierBlock + i + 1), ExecutionID: tierExecID(x), Payload: strings.Repeat("a", tierPayload)})
	}
	return p
}

// TestTierCheckExec: the per-execution rows count only a read that
// returned the execution's every event, in order, whole (RED controls: a
// short page, a foreign record, a wrong sequence, a cut payload).
func TestTierCheckExec(t *testing.T) {
	if err := tierCheckExec(tierPage3(3), 3); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*bucketlog.Page){
		"short":   func(p *bucketlog.Page) { p.Records = p.Records[1:] },
		"foreign": func(p *bucketlog.Page) { p.Records[5].ExecutionID = tierExecID(4) },
		"seq":     func(p *bucketlog.Page) { p.Records[7].Seq++ },
		"payload": func(p *bucketlog.Page) { p.Records[9].Payload = p.Records[9].Payload[1:] },
	}
	for name, f := range bad {
		p := tierPage3(3)
		f(&p)
		if tierCheckExec(p, 3) == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

// TestTierSegmentsOf counts the evicted segments a range touches, and
// never a local one or one without events.
func TestTierSegmentsOf(t *testing.T) {
	ts := tierShard{segs: []localseg.SegmentInfo{
		{ID: 1, FirstSeq: 1, LastSeq: 100, Events: 100},
		{ID: 2, FirstSeq: 101, LastSeq: 200, Events: 100},
		{ID: 3, FirstSeq: 201, LastSeq: 200, Events: 0},
		{ID: 4, FirstSeq: 201, LastSeq: 300, Events: 100},
	}, evicted: map[uint64]bool{1: true, 2: true, 3: true}}
	for _, c := range []struct {
		first, last uint64
		want        int
	}{{1, 64, 1}, {65, 128, 2}, {101, 200, 1}, {190, 210, 1}, {250, 260, 0}} {
		if got := tierSegmentsOf(ts, c.first, c.last); got != c.want {
			t.Errorf("%d–%d: %d segments, want %d", c.first, c.last, got, c.want)
		}
	}
}
