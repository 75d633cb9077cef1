package localseg_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// ScanBytes and ReadExecutionBytes return the same records as Scan and
// ReadExecution, cut before the budget is passed (never below one record),
// over several segments and with consumer frames between events; without a
// budget they equal their namesakes.
func TestPagesBoundedByBytes(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{SegmentMaxBytes: 64 << 10})
	defer closeT(t, s)
	sizes := map[uint64]int{}
	for i := range 60 {
		n := 1000 + (i%7)*3000
		if i == 30 {
			n = 40 << 10 // over any budget below
		}
		exec := fmt.Sprint(i % 2)
		seq := mustAppend(t, s, localseg.Event{ExecutionID: exec, TransactionID: fmt.Sprint("t", i), Payload: strings.Repeat("p", n)})
		sizes[seq] = n
		if i%5 == 0 {
			if _, err := s.Pull("c", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Ack("c", seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	whole, err := s.Scan(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if p, cut, err := s.ScanBytes(0, 1000, 0); err != nil || cut || len(p.Records) != len(whole.Records) {
		t.Fatalf("no budget: %d records, cut %v, %v", len(p.Records), cut, err)
	}
	for _, budget := range []int64{1, 5000, 20 << 10, 100 << 10} {
		for name, page := range map[string]func(after uint64) (localseg.Page, bool, error){
			"scan": func(after uint64) (localseg.Page, bool, error) { return s.ScanBytes(after, 1000, budget) },
			"read": func(after uint64) (localseg.Page, bool, error) { return s.ReadExecutionBytes("1", after, 1000, budget) },
		} {
			var got []localseg.Record
			var after uint64
			for {
				p, cut, err := page(after)
				if err != nil {
					t.Fatal(err)
				}
				var payload int64
				for _, r := range p.Records {
					payload += int64(len(r.Payload))
				}
				if len(p.Records) > 1 && payload > budget {
					t.Fatalf("%s budget %d: %d records of %d payload bytes", name, budget, len(p.Records), payload)
				}
				got = append(got, p.Records...)
				if !cut {
					break
				}
				if len(p.Records) == 0 {
					t.Fatalf("%s budget %d: a cut page with no record", name, budget)
				}
				after = p.Records[len(p.Records)-1].Seq
			}
			want := whole.Records
			if name == "read" {
				r, err := s.ReadExecution("1", 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				want = r.Records
			}
			if len(got) != len(want) {
				t.Fatalf("%s budget %d: %d records, want %d", name, budget, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] || len(got[i].Payload) != sizes[got[i].Seq] {
					t.Fatalf("%s budget %d: record %d differs", name, budget, i)
				}
			}
		}
	}
}
