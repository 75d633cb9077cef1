package localseg_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestFiftyOpenAppendCloseCycles is CHECKLIST §1.17: fifty open → append →
// close cycles over one store lose nothing, duplicate nothing, open without
// a replay (the checkpoint is trusted), and end in exactly the state a full
// replay of the segments gives.
func TestFiftyOpenAppendCloseCycles(t *testing.T) {
	dir := t.TempDir()
	opts := localseg.Options{SegmentMaxBytes: 2048}
	var want []localseg.Record
	acked := uint64(0)
	for cycle := 1; cycle <= 50; cycle++ {
		st, err := localseg.Open(dir, opts)
		if err != nil {
			t.Fatalf("cycle %d: open: %v", cycle, err)
		}
		if cycle > 1 && localseg.ReplayRunsForTest(st) != 0 {
			t.Fatalf("cycle %d: open replayed with a trusted checkpoint", cycle)
		}
		for i := 0; i < 3; i++ {
			ev := localseg.Event{ExecutionID: fmt.Sprint(cycle % 4), TransactionID: fmt.Sprintf("t-%d-%d", cycle, i), Payload: fmt.Sprintf(`{"cycle":%d,"i":%d,"s":"<é>"}`, cycle, i)}
			res, err := st.Append(ev)
			if err != nil {
				t.Fatalf("cycle %d: append: %v", cycle, err)
			}
			if res.Seq != uint64(len(want)+1) {
				t.Fatalf("cycle %d: sequence %d after %d events", cycle, res.Seq, len(want))
			}
			want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: ev.ExecutionID, TransactionID: ev.TransactionID, Payload: ev.Payload})
		}
		if cycle%5 == 0 {
			if _, err := st.Pull("c", 1); err != nil {
				t.Fatal(err)
			}
			acked = uint64(len(want)) - 1
			if _, err := st.Ack("c", acked); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", cycle, err)
		}
	}

	read := func(st *localseg.Store) ([]localseg.Record, localseg.Snapshot) {
		t.Helper()
		p, err := st.Scan(0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return p.Records, snap
	}
	st, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 2048, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got, snap := read(st)
	st.Close()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after 50 cycles: %d records, want %d (first difference hidden in %v)", len(got), len(want), got[:min(3, len(got))])
	}
	if snap.Consumers["c"] != acked {
		t.Fatalf("cursor %d, want %d", snap.Consumers["c"], acked)
	}

	// The same state from a full replay: without the checkpoint.
	if err := os.Remove(filepath.Join(dir, "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	st, err = localseg.Open(dir, localseg.Options{SegmentMaxBytes: 2048, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	replayed, rsnap := read(st)
	if !reflect.DeepEqual(replayed, want) || rsnap.Tip != snap.Tip || !reflect.DeepEqual(rsnap.Consumers, snap.Consumers) || len(rsnap.Segments) != len(snap.Segments) {
		t.Fatalf("full replay differs: %d records tip %d consumers %v segments %d; checkpointed: tip %d consumers %v segments %d",
			len(replayed), rsnap.Tip, rsnap.Consumers, len(rsnap.Segments), snap.Tip, snap.Consumers, len(snap.Segments))
	}
	if len(snap.Segments) < 5 {
		t.Fatalf("only %d segments: the cycles should roll over", len(snap.Segments))
	}
}
