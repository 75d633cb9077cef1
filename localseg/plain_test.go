package localseg

import (
	"fmt"
	"testing"
)

func plainEvents(from, n int, payload func(i int) string) []Event {
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{ExecutionID: fmt.Sprintf("e%d", (from+i)%7), TransactionID: fmt.Sprintf("t%d", from+i), Payload: payload(from + i)}
	}
	return evs
}

func scanAllRecords(t *testing.T, s *Store) []Record {
	t.Helper()
	var out []Record
	for after := uint64(0); ; {
		p, err := s.Scan(after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) == 0 {
			return out
		}
		out = append(out, p.Records...)
		after = p.Records[len(p.Records)-1].Seq
	}
}

func checkRecords(t *testing.T, got []Record, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.Seq != uint64(i+1) || r.ExecutionID != w.ExecutionID || r.TransactionID != w.TransactionID || r.Payload != w.Payload {
			t.Fatalf("record %d = %+v, want %+v", i+1, r, w)
		}
	}
}

// TestPlainSegmentsReadBack: a replayed segment whose events have no
// escape is read by the layout-only parse, one with escapes is not, and an
// event appended after the index was built (with escapes) into a segment
// the replay found plain is still decoded exactly.
func TestPlainSegmentsReadBack(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentMaxBytes: 4 << 10}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	escaped := func(i int) string { return fmt.Sprintf("q\"%d\\n\n", i) }
	plain := func(i int) string { return fmt.Sprintf("payload %d", i) }
	var want []Event
	add := func(evs []Event) {
		t.Helper()
		if _, _, err := s.AppendBatch(evs); err != nil {
			t.Fatal(err)
		}
		want = append(want, evs...)
	}
	add(plainEvents(0, 20, escaped)) // the first segments: escapes
	add(plainEvents(20, 20, plain))  // at least the last one plain
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkRecords(t, scanAllRecords(t, s), want)
	s.mu.Lock()
	flags := make([]bool, len(s.idx.segs))
	for i := range s.idx.segs {
		flags[i] = s.idx.segs[i].plain
	}
	s.mu.Unlock()
	if len(flags) < 2 || flags[0] || !flags[len(flags)-1] {
		t.Fatalf("plain flags of the replayed segments: %v, want the escaped one false and the last true", flags)
	}

	// Appended after the build into the last (plain) segment, or into a
	// new one.
	add(plainEvents(40, 5, escaped))
	checkRecords(t, scanAllRecords(t, s), want)
	for _, seq := range []uint64{21, 41, 45} {
		r, err := s.Get(seq)
		if err != nil || r.Payload != want[seq-1].Payload {
			t.Fatalf("Get(%d) = %+v, %v; want payload %q", seq, r, err, want[seq-1].Payload)
		}
	}
}
