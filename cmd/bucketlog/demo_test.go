package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// runInProcess runs the command in this process (the goroutine-leak check
// of TestMain then covers it) and returns the exit code, stdout and
// stderr.
func runInProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
	return code, stdout.String(), stderr.String()
}

// TestDemo runs `bucketlog demo` and checks its exit code and summary.
func TestDemo(t *testing.T) {
	code, stdout, stderr := runInProcess(t, "demo")
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"appended   4400 events", "shard 0", "shard 1", "both shard directories deleted", "restore    shard 1", "nothing lost"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the summary lacks %q:\n%s", want, stdout)
		}
	}
	t.Logf("demo output:\n%s", stdout)
}

// TestDemoBinaryLinksNoEmulator: the operator binary runs the demo on an
// in-memory bucket and links no emulator module (they are for tests:
// bucketlogtest, internal/emulator).
func TestDemoBinaryLinksNoEmulator(t *testing.T) {
	info, err := buildinfo.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range info.Deps {
		for _, emu := range []string{"github.com/johannesboyne/gofakes3", "github.com/fsouza/fake-gcs-server", "github.com/gorilla/mux", "github.com/gorilla/handlers"} {
			if dep.Path == emu {
				t.Errorf("the bucketlog binary links %s %s", dep.Path, dep.Version)
			}
		}
	}
}

// TestDemoJSON checks the machine-readable summary: the counts add up, GC
// reclaimed something on each shard, segments sealed, tail objects carried
// the last events, and nothing was lost.
func TestDemoJSON(t *testing.T) {
	code, stdout, stderr := runInProcess(t, "demo", "--json", "--events", "2000", "--after-gc", "100", "--writers", "4")
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Count(stdout, "\n") != 1 {
		t.Fatalf("--json prints one line:\n%s", stdout)
	}
	var rep demoReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.NothingLost || len(rep.Problems) != 0 || rep.Events != 2100 || len(rep.Shards) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	var events, restored int
	var reclaimed uint64
	for _, s := range rep.Shards {
		events += s.Events
		restored += s.RestoredEvents
		reclaimed += s.ReclaimedEvents
		if s.SegmentsSealed < 2 || s.ReclaimedSegs < 1 || s.ReclaimedEvents == 0 || s.ReclaimedEvents > s.ConsumerAcked {
			t.Errorf("shard %d: %+v", s.Shard, s)
		}
		if s.TailRecords == 0 {
			t.Errorf("shard %d: no event came from a tail object (the events after GC ship only in the tail)", s.Shard)
		}
		if uint64(s.RestoredEvents) != uint64(s.Events)-s.ReclaimedEvents {
			t.Errorf("shard %d: restored %d of %d events with %d reclaimed", s.Shard, s.RestoredEvents, s.Events, s.ReclaimedEvents)
		}
	}
	if events != rep.Events || restored != rep.RestoredEvents || reclaimed != rep.ReclaimedEvents {
		t.Errorf("totals do not add up: %+v", rep)
	}
	if rep.BucketObjects >= rep.ObjectsBeforeGC+2*3 || rep.BucketBytes == 0 {
		t.Errorf("bucket objects: %d before GC, %d after close (%d bytes)", rep.ObjectsBeforeGC, rep.BucketObjects, rep.BucketBytes)
	}
}

// TestDemoDetectsLoss is the demo's RED control: with a tail object
// deleted from the bucket before the restore (the events after GC live
// only there), the demo must not say "nothing lost": it exits non-zero
// naming the loss.
func TestDemoDetectsLoss(t *testing.T) {
	var deleted []string
	cfg := demoConfig{events: 600, afterGC: 50, writers: 4, executions: 50, segmentMaxBytes: 16 << 10, tailInterval: time.Hour,
		tamper: func(ctx context.Context, b *blob.Bucket) error {
			it := b.List(&blob.ListOptions{Prefix: "noetl.ehdb.tail.00000001."})
			for {
				obj, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
				deleted = append(deleted, obj.Key)
			}
			for _, k := range deleted {
				if err := b.Delete(ctx, k); err != nil {
					return err
				}
			}
			return nil
		}}
	c := &cli{log: quietLogger()}
	rep, err := demo(context.Background(), cfg, c)
	if len(deleted) == 0 {
		t.Fatal("the control deleted nothing: shard 1 shipped no tail object")
	}
	if err == nil || !errors.Is(err, bucketlog.ErrInvariant) || rep.NothingLost || len(rep.Problems) == 0 {
		t.Fatalf("with tail objects %v deleted the demo said: err=%v, report %+v", deleted, err, rep)
	}
	t.Logf("RED control: deleting %v → %v", deleted, err)

	var out bytes.Buffer
	printDemo(&out, rep)
	if !strings.Contains(out.String(), "LOST") || strings.Contains(out.String(), "nothing lost") {
		t.Errorf("the summary of a loss:\n%s", out.String())
	}
}

// TestCompareRestored checks the demo's verifier on pages with one fault
// each: it must catch every one.
func TestCompareRestored(t *testing.T) {
	expected := map[uint64]demoEvent{}
	var recs []localseg.Record
	for seq := uint64(1); seq <= 10; seq++ {
		ev := demoEvent{exec: "7", txn: fmt.Sprint("t", seq), payload: demoPayload(int(seq), "7")}
		expected[seq] = ev
		recs = append(recs, localseg.Record{Seq: seq, ExecutionID: ev.exec, TransactionID: ev.txn, Payload: ev.payload})
	}
	page := func(base uint64, rs []localseg.Record) localseg.Page {
		return localseg.Page{Exists: true, Base: base, Records: append([]localseg.Record(nil), rs...)}
	}
	if p := compareRestored(0, page(4, recs[3:]), expected, 3); len(p) != 0 {
		t.Fatalf("a faithful restore reported problems: %v", p)
	}
	changed := append([]localseg.Record(nil), recs[3:]...)
	changed[2].Payload += " "
	gap := append(append([]localseg.Record(nil), recs[3:5]...), recs[6:]...)
	for name, tc := range map[string]struct {
		page  localseg.Page
		acked uint64
	}{
		"payload changed":           {page(4, changed), 3},
		"event missing (gap)":       {page(4, gap), 3},
		"last event missing":        {page(4, recs[3:9]), 3},
		"reclaimed past the cursor": {page(6, recs[5:]), 3},
		"extra event": {page(4, append(append([]localseg.Record(nil), recs[3:]...),
			localseg.Record{Seq: 11, ExecutionID: "7", TransactionID: "x", Payload: "x"})), 3},
	} {
		if p := compareRestored(0, tc.page, expected, tc.acked); len(p) == 0 {
			t.Errorf("%s: not detected", name)
		}
	}
}
