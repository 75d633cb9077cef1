package localref

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

func openT(t *testing.T, path string) *Driver {
	t.Helper()
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return d
}

// TestReferenceRoundTrip: payloads round-trip byte for byte across a
// reopen, and the next append continues the sequence.
func TestReferenceRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	d := openT(t, path)
	payloads := []string{"<a href=\"x\">&amp; é — 日本</a>", "back\\slash \"quoted\"", "\u2028\u2029", "", "line\nbreak"}
	for i, p := range payloads {
		r, err := d.Append(localseg.Event{ExecutionID: "100", TransactionID: "t", Payload: p})
		if err != nil || r.Seq != uint64(i+1) {
			t.Fatalf("append %d: %+v, %v", i, r, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openT(t, path)
	defer d.Close()
	pg, err := d.ReadExecution("100", 0, 100)
	if err != nil || len(pg.Records) != len(payloads) {
		t.Fatalf("read = %+v, %v", pg, err)
	}
	for i, p := range payloads {
		if pg.Records[i].Payload != p {
			t.Errorf("payload %d = %q, want %q", i, pg.Records[i].Payload, p)
		}
	}
	if r, err := d.Append(localseg.Event{ExecutionID: "100", TransactionID: "t", Payload: "next"}); err != nil || r.Seq != uint64(len(payloads)+1) || r.Created {
		t.Fatalf("append after reopen = %+v, %v", r, err)
	}
}

// TestReferenceTornLineDropped: a last line without its newline was never
// acknowledged; reopen drops it, truncates, and the next append continues.
func TestReferenceTornLineDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	d := openT(t, path)
	for range 3 {
		if _, err := d.Append(localseg.Event{ExecutionID: "1", TransactionID: "t", Payload: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	whole, _ := os.ReadFile(path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"kind":"event","global_sequence":4,"execution_id":"1","transa`)
	f.Close()

	d = openT(t, path)
	if d.Tip() != 3 {
		t.Fatalf("tip after a torn line = %d, want 3", d.Tip())
	}
	if after, _ := os.ReadFile(path); string(after) != string(whole) {
		t.Fatalf("torn line not truncated")
	}
	if r, err := d.Append(localseg.Event{ExecutionID: "1", TransactionID: "t", Payload: "p"}); err != nil || r.Seq != 4 {
		t.Fatalf("append after repair = %+v, %v", r, err)
	}
	d.Close()
	d = openT(t, path)
	defer d.Close()
	if d.Tip() != 4 {
		t.Fatalf("second reopen tip = %d, want 4", d.Tip())
	}
}

// TestReferenceCorruptLineIsError: a whole line that does not decode, an
// unknown kind or a sequence gap is corruption, never skipped.
func TestReferenceCorruptLineIsError(t *testing.T) {
	for name, content := range map[string]string{
		"not json":      "{\"kind\":\"event\",\"global_sequence\":1,\"execution_id\":\"1\",\"transaction_id\":\"t\",\"payload\":\"p\"}\nnot json\n",
		"unknown kind":  "{\"kind\":\"snapshot\"}\n",
		"sequence gap":  "{\"kind\":\"event\",\"global_sequence\":2,\"execution_id\":\"1\",\"transaction_id\":\"t\",\"payload\":\"p\"}\n",
		"stray ack":     "{\"kind\":\"ack\",\"consumer\":\"c\",\"sequence\":1}\n",
		"flipped quote": "{\"kind\":\"event\",\"global_sequence\":1,\"execution_id\":\"1\",\"transaction_id\":\"t\",\"payload\":\"p}\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log.jsonl")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			d, err := Open(path, Options{})
			if !errors.Is(err, localseg.ErrCorrupt) {
				if d != nil {
					d.Close()
				}
				t.Fatalf("open = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), "line") {
				t.Errorf("error %q does not name the line", err)
			}
		})
	}
}

// TestReferenceSecondOpenLocked: one writer per file.
func TestReferenceSecondOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	d := openT(t, path)
	defer d.Close()
	if d2, err := Open(path, Options{}); !errors.Is(err, localseg.ErrLocked) {
		if d2 != nil {
			d2.Close()
		}
		t.Fatalf("second open = %v, want ErrLocked", err)
	}
}

// TestReferenceWriteErrorPoisons: after a failed write every later write
// fails until reopen, and nothing half-written is acknowledged.
func TestReferenceWriteErrorPoisons(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	d := openT(t, path)
	if _, err := d.Append(localseg.Event{ExecutionID: "1", TransactionID: "t", Payload: "kept"}); err != nil {
		t.Fatal(err)
	}
	d.f.Close() // the next write fails
	ev := localseg.Event{ExecutionID: "1", TransactionID: "t", Payload: "lost"}
	if _, err := d.Append(ev); !errors.Is(err, localseg.ErrPoisoned) {
		t.Fatalf("append on a failing file = %v, want ErrPoisoned", err)
	}
	if _, err := d.Append(ev); !errors.Is(err, localseg.ErrPoisoned) {
		t.Fatalf("append after poison = %v, want ErrPoisoned", err)
	}
	if d.Tip() != 1 {
		t.Fatalf("tip after failed appends = %d, want 1", d.Tip())
	}
	d.Close()
	d = openT(t, path)
	defer d.Close()
	if r, err := d.Append(ev); err != nil || r.Seq != 2 {
		t.Fatalf("append after reopen = %+v, %v", r, err)
	}
}
