package localref

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// eventLog is the surface both drivers share. The compile-time checks below
// are the point: the durable store and the reference driver are drop-in
// replacements for each other.
type eventLog interface {
	Append(localseg.Event) (localseg.AppendResult, error)
	AppendBatch([]localseg.Event) (first, last uint64, err error)
	Scan(after uint64, limit int) (localseg.Page, error)
	ReadExecution(executionID string, after uint64, limit int) (localseg.Page, error)
	Pull(consumer string, limit int) (localseg.PullResult, error)
	Ack(consumer string, seq uint64) (uint64, error)
	DeleteConsumer(consumer string) error
	Tip() uint64
	Close() error
}

var (
	_ eventLog = (*localseg.Store)(nil)
	_ eventLog = (*Driver)(nil)
)

// opener opens a driver over dir; called again on the same dir it reopens.
type opener func(dir string) (eventLog, error)

func openDurable(dir string) (eventLog, error) {
	// The reference driver follows the seeds, which do not de-duplicate:
	// parity is with the transaction window off (localseg/txwindow.go).
	return localseg.Open(filepath.Join(dir, "shard-0000"), localseg.Options{TransactionWindow: -1})
}

func openReference(dir string) (eventLog, error) {
	return Open(filepath.Join(dir, "log.jsonl"), Options{})
}

// errClass maps an error to the class a caller can observe (cmd/bucketlog/doc.go, Errors), with
// the finer distinctions the two drivers must also agree on.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, localseg.ErrTooLarge):
		return "too_large"
	case errors.Is(err, localseg.ErrInvalidInput):
		return "invalid_input"
	case errors.Is(err, localseg.ErrUnknownConsumer):
		return "unknown_consumer"
	case errors.Is(err, localseg.ErrInvalidState):
		return "invalid_state"
	case errors.Is(err, localseg.ErrClosed):
		return "closed"
	case errors.Is(err, localseg.ErrCorrupt):
		return "corrupt"
	default:
		return "other"
	}
}

// normalize makes empty slices nil so that "no records" compares equal
// whichever way a driver spells it.
func normalize(v any) any {
	switch x := v.(type) {
	case localseg.Page:
		if len(x.Records) == 0 {
			x.Records = nil
		}
		return x
	case localseg.PullResult:
		if len(x.Records) == 0 {
			x.Records = nil
		}
		return x
	}
	return v
}

type step struct {
	name string
	do   func(d eventLog) (any, error)
	// reopen closes the driver and opens it again over the same dir
	// before the step runs.
	reopen bool
}

type pair struct{ first, last uint64 }

func appendStep(exec, txn, payload string) step {
	return step{name: fmt.Sprintf("append %q/%q", exec, txn), do: func(d eventLog) (any, error) {
		return d.Append(localseg.Event{ExecutionID: exec, TransactionID: txn, Payload: payload})
	}}
}

func batchStep(name string, evs ...localseg.Event) step {
	return step{name: "batch " + name, do: func(d eventLog) (any, error) {
		f, l, err := d.AppendBatch(evs)
		return pair{f, l}, err
	}}
}

func scanStep(after uint64, limit int) step {
	return step{name: fmt.Sprintf("scan after=%d limit=%d", after, limit), do: func(d eventLog) (any, error) {
		return d.Scan(after, limit)
	}}
}

func readStep(exec string, after uint64, limit int) step {
	return step{name: fmt.Sprintf("read %q after=%d limit=%d", exec, after, limit), do: func(d eventLog) (any, error) {
		return d.ReadExecution(exec, after, limit)
	}}
}

func pullStep(consumer string, limit int) step {
	return step{name: fmt.Sprintf("pull %q limit=%d", consumer, limit), do: func(d eventLog) (any, error) {
		return d.Pull(consumer, limit)
	}}
}

func ackStep(consumer string, seq uint64) step {
	return step{name: fmt.Sprintf("ack %q %d", consumer, seq), do: func(d eventLog) (any, error) {
		return d.Ack(consumer, seq)
	}}
}

func deleteStep(consumer string) step {
	return step{name: fmt.Sprintf("delete consumer %q", consumer), do: func(d eventLog) (any, error) {
		return nil, d.DeleteConsumer(consumer)
	}}
}

func tipStep() step {
	return step{name: "tip", do: func(d eventLog) (any, error) { return d.Tip(), nil }}
}

func reopenStep() step {
	return step{name: "reopen", reopen: true, do: func(d eventLog) (any, error) { return d.Tip(), nil }}
}

func e(exec, txn, payload string) localseg.Event {
	return localseg.Event{ExecutionID: exec, TransactionID: txn, Payload: payload}
}

// paritySteps is the one op sequence of CHECKLIST §1.11: appends across
// executions, a batch, scans with after/limit, per-execution reads, pulls and
// acks including invalid ones, a consumer delete, invalid input and reopens.
func paritySteps() []step {
	tricky := "<a href=\"x\">&amp; é — 日本</a> \\ \"q\" \u2028\u2029 \t\n end"
	return []step{
		// An empty log.
		tipStep(),
		scanStep(0, 10),
		readStep("100", 0, 10),
		pullStep("projector", 10),
		ackStep("projector", 1),
		ackStep("projector", 0),
		deleteStep("projector"),
		scanStep(0, 10), // the pull of the empty log wrote nothing
		// Appends across executions.
		appendStep("100", "txn-100-1", "a"),
		appendStep(" 200 ", "txn-200-1", tricky),
		appendStep("100", "txn-100-2", ""),
		appendStep("exec-abc_Z", "txn-x", "{\"k\":[1,2,3]}"),
		// Invalid input changes nothing.
		appendStep("", "t", "p"),
		appendStep("   ", "t", "p"),
		appendStep("a b", "t", "p"),
		appendStep("exec/1", "t", "p"),
		appendStep("ü", "t", "p"),
		appendStep(strings.Repeat("x", localseg.MaxIDLen), "t", "max id"),
		appendStep(strings.Repeat("x", localseg.MaxIDLen+1), "t", "p"),
		appendStep("100", "", "p"),
		appendStep("100", "  ", "p"),
		appendStep("100", "t", "bad \xff\xfe utf8"),
		appendStep("100", "t", strings.Repeat("z", localseg.DefaultSegmentMaxBytes)),
		tipStep(),
		// Batches.
		batchStep("three", e("300", "b1", "x"), e("100", "b2", "y"), e("200", "b3", "z")),
		batchStep("empty"),
		batchStep("one invalid", e("300", "b4", "x"), e("bad id", "b5", "y")),
		batchStep("one too large", e("300", "b4", "x"), e("300", "b5", strings.Repeat("z", localseg.DefaultSegmentMaxBytes))),
		tipStep(),
		// Scans.
		scanStep(0, 100),
		scanStep(0, 2),
		scanStep(2, 2),
		scanStep(6, 10),
		scanStep(7, 10),
		scanStep(8, 10),
		scanStep(1000, 10),
		scanStep(0, 0),
		scanStep(0, -1),
		// Per-execution reads.
		readStep("100", 0, 10),
		readStep("100", 0, 1),
		readStep("100", 1, 1),
		readStep("100", 3, 10),
		readStep("100", 6, 10),
		readStep(" 200\t", 0, 10),
		readStep("999", 0, 10),
		readStep("bad id", 0, 10),
		readStep("", 0, 10),
		readStep("100", 0, 0),
		// Pulls and acks.
		pullStep("projector", 2),
		pullStep("projector", 2),
		pullStep(" projector ", 100),
		pullStep("bad name", 10),
		pullStep("", 10),
		pullStep("other", 0),
		ackStep("projector", 0),
		ackStep("projector", 8),
		ackStep("projector", 1000),
		ackStep("ghost", 1),
		ackStep("ghost", 0),
		ackStep("bad name", 1),
		ackStep("projector", 2),
		ackStep("projector", 1),
		ackStep("projector", 2),
		ackStep(" projector", 3),
		pullStep("projector", 10),
		pullStep("second", 3),
		// Restart.
		reopenStep(),
		scanStep(0, 100),
		readStep("200", 0, 10),
		pullStep("projector", 10),
		pullStep("second", 10),
		appendStep("200", "txn-200-2", "after reopen"),
		pullStep("projector", 10),
		ackStep("projector", 8),
		ackStep("projector", 9),
		// Consumer delete.
		deleteStep("second"),
		deleteStep("second"),
		deleteStep("ghost"),
		deleteStep("bad name"),
		reopenStep(),
		pullStep("projector", 1),
		pullStep("second", 1),
		scanStep(0, 100),
		batchStep("after reopen", e("400", "c1", "1"), e("400", "c2", "2")),
		readStep("400", 0, 10),
		tipStep(),
	}
}

// runParity drives steps through two drivers and returns every difference
// in observable results (values and error classes).
func runParity(t *testing.T, steps []step, openA, openB opener) []string {
	t.Helper()
	dirA, dirB := t.TempDir(), t.TempDir()
	a, err := openA(dirA)
	if err != nil {
		t.Fatalf("open A: %v", err)
	}
	b, err := openB(dirB)
	if err != nil {
		t.Fatalf("open B: %v", err)
	}
	var diffs []string
	for i, s := range steps {
		if s.reopen {
			if err := a.Close(); err != nil {
				t.Fatalf("close A: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Fatalf("close B: %v", err)
			}
			if a, err = openA(dirA); err != nil {
				t.Fatalf("reopen A: %v", err)
			}
			if b, err = openB(dirB); err != nil {
				t.Fatalf("reopen B: %v", err)
			}
		}
		va, ea := s.do(a)
		vb, eb := s.do(b)
		ca, cb := errClass(ea), errClass(eb)
		switch {
		case ca != cb:
			diffs = append(diffs, fmt.Sprintf("step %d %s: error class %s (%v) vs %s (%v)", i, s.name, ca, ea, cb, eb))
		case ca == "ok" && !reflect.DeepEqual(normalize(va), normalize(vb)):
			diffs = append(diffs, fmt.Sprintf("step %d %s: %+v vs %+v", i, s.name, va, vb))
		}
	}
	// Both are closed; every operation after close is refused alike.
	if err := a.Close(); err != nil {
		t.Fatalf("close A: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close B: %v", err)
	}
	for _, s := range []step{appendStep("1", "t", "p"), scanStep(0, 1), pullStep("projector", 1), ackStep("projector", 1)} {
		_, ea := s.do(a)
		_, eb := s.do(b)
		if errClass(ea) != "closed" || errClass(eb) != "closed" {
			diffs = append(diffs, fmt.Sprintf("after close, %s: %v vs %v (want closed)", s.name, ea, eb))
		}
	}
	return diffs
}

// TestParityDurableVersusReference: one op sequence through the durable
// driver and the local_reference driver gives identical results
// (CHECKLIST §1.11).
func TestParityDurableVersusReference(t *testing.T) {
	for _, d := range runParity(t, paritySteps(), openDurable, openReference) {
		t.Error(d)
	}
}

// skewed is a reference driver with one semantic bug: a pull does not
// report that it created the consumer.
type skewed struct{ *Driver }

func (s skewed) Pull(c string, limit int) (localseg.PullResult, error) {
	r, err := s.Driver.Pull(c, limit)
	r.Created = false
	return r, err
}

// offByOne counts one record too many in scans.
type offByOne struct{ *Driver }

func (o offByOne) Scan(after uint64, limit int) (localseg.Page, error) {
	p, err := o.Driver.Scan(after, limit)
	if p.Exists {
		p.RecordCount++
	}
	return p, err
}

// TestParityCatchesDivergence is the RED control of the parity test: a
// driver with a small semantic difference is reported, so the comparison
// can fail.
func TestParityCatchesDivergence(t *testing.T) {
	wrap := func(f func(*Driver) eventLog) opener {
		return func(dir string) (eventLog, error) {
			d, err := Open(filepath.Join(dir, "log.jsonl"), Options{})
			if err != nil {
				return nil, err
			}
			return f(d), nil
		}
	}
	for name, o := range map[string]opener{
		"created flag": wrap(func(d *Driver) eventLog { return skewed{d} }),
		"record count": wrap(func(d *Driver) eventLog { return offByOne{d} }),
	} {
		if diffs := runParity(t, paritySteps(), openReference, o); len(diffs) == 0 {
			t.Errorf("%s: the parity comparison did not notice the divergence", name)
		}
	}
	// Reference against itself: no difference (the comparison is not
	// noisy).
	if diffs := runParity(t, paritySteps(), openReference, openReference); len(diffs) != 0 {
		t.Errorf("reference against itself: %v", diffs)
	}
}
