package drives

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestRecoveryDriveHolds: on a fresh root the recovery drive holds and its
// JSON is the seed's (CHECKLIST §1.13).
func TestRecoveryDriveHolds(t *testing.T) {
	rep, err := Recovery(filepath.Join(t.TempDir(), "fresh"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Holds() || !rep.Recovered {
		t.Fatalf("recovery drive does not hold: %+v (divergence %v)", rep, deref(rep.Report.Divergence))
	}
	want := `{"driver":"ehdb-durable-segment","recovered":true,"report":{"appended":3,"zero_loss":true,"ordering_ok":true,"scope_ok":true,"payloads_match":true,"cursor_survived":true,"pending_after_restart":2,"divergence":null}}`
	if got := mustJSON(t, rep); got != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
}

// TestRecoveryDriveCustomConsumerAndEvents: a named consumer and a larger
// event set with a padded execution id.
func TestRecoveryDriveCustomConsumerAndEvents(t *testing.T) {
	evs := append(recoveryEvents(),
		localseg.Event{ExecutionID: " 300 ", TransactionID: "t-300", Payload: "padded id"},
		localseg.Event{ExecutionID: "200", TransactionID: "t-200-2", Payload: ""},
	)
	rep, err := recovery(t.TempDir(), " projector ", evs, recoveryHooks{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Holds() || rep.Report.Appended != 5 || rep.Report.PendingAfterRestart != 4 {
		t.Fatalf("report %+v, divergence %v", rep.Report, deref(rep.Report.Divergence))
	}
}

// TestRecoveryDriveRefusesEmptyInput: an empty event set, an empty root, a
// root that already holds data and a bad consumer are refused, and a
// refused root is left as it was (CHECKLIST §1.13).
func TestRecoveryDriveRefusesEmptyInput(t *testing.T) {
	if _, err := recovery(t.TempDir(), "", nil, recoveryHooks{}); !errors.Is(err, ErrUsage) {
		t.Errorf("empty event set: err = %v, want ErrUsage", err)
	}
	for _, root := range []string{"", "   "} {
		if _, err := Recovery(root, ""); !errors.Is(err, ErrUsage) {
			t.Errorf("root %q: err = %v, want ErrUsage", root, err)
		}
	}
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "keep.txt"), []byte("real data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Recovery(used, ""); !errors.Is(err, ErrUsage) {
		t.Errorf("non-empty root: err = %v, want ErrUsage", err)
	}
	if entries, _ := os.ReadDir(used); len(entries) != 1 {
		t.Errorf("a refused drive wrote into the root: %v", entries)
	}
	// A second run over the first run's root is refused too.
	root := t.TempDir()
	if _, err := Recovery(root, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := Recovery(root, ""); !errors.Is(err, ErrUsage) {
		t.Errorf("second run on the same root: err = %v, want ErrUsage", err)
	}
	if _, err := Recovery(t.TempDir(), "bad name"); !errors.Is(err, ErrUsage) {
		t.Errorf("bad consumer: err = %v, want ErrUsage", err)
	}
}

// TestRecoveryDriveRedLostTail is a RED control: when the restart loses the
// last event and the consumer frames after it (bytes that never reached the
// disk), the drive reports loss and does not hold.
func TestRecoveryDriveRedLostTail(t *testing.T) {
	hooks := recoveryHooks{afterClose: func(dir string) error {
		seg := firstSegment(dir)
		b, err := os.ReadFile(seg)
		if err != nil {
			return err
		}
		starts, kinds := segmentFrames(b)
		last := -1
		for i, k := range kinds {
			if k == localseg.KindEvent {
				last = starts[i]
			}
		}
		if last < 0 {
			return errors.New("no event frame found")
		}
		if err := os.Truncate(seg, int64(last)); err != nil {
			return err
		}
		return os.Remove(filepath.Join(dir, "checkpoint.json"))
	}}
	rep, err := recovery(t.TempDir(), "", recoveryEvents(), hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("divergence: %s", deref(rep.Report.Divergence))
	if rep.Holds() || rep.Recovered || rep.Report.ZeroLoss || rep.Report.CursorSurvived || rep.Report.Divergence == nil {
		t.Fatalf("a lost tail was not reported: %+v", rep.Report)
	}
}

// TestRecoveryDriveRedCorruptPayload is a RED control: a flipped byte in a
// stored event makes the drive not hold (the store refuses corrupt data).
func TestRecoveryDriveRedCorruptPayload(t *testing.T) {
	hooks := recoveryHooks{afterClose: func(dir string) error {
		if err := flipByte(firstSegment(dir)); err != nil {
			return err
		}
		return os.Remove(filepath.Join(dir, "checkpoint.json"))
	}}
	rep, err := recovery(t.TempDir(), "", recoveryEvents(), hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("divergence: %s", deref(rep.Report.Divergence))
	if rep.Holds() || rep.Report.Divergence == nil {
		t.Fatalf("a corrupt event was not reported: %+v", rep.Report)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestRecoveryDriveRedLostAck is a RED control for cursor survival: the
// restart keeps every event but loses the Ack frame, and the drive reports
// the cursor as lost while zero loss still holds.
func TestRecoveryDriveRedLostAck(t *testing.T) {
	hooks := recoveryHooks{afterClose: func(dir string) error {
		seg := firstSegment(dir)
		b, err := os.ReadFile(seg)
		if err != nil {
			return err
		}
		starts, kinds := segmentFrames(b)
		for i, k := range kinds {
			if k == localseg.KindAck {
				if err := os.Truncate(seg, int64(starts[i])); err != nil {
					return err
				}
				return os.Remove(filepath.Join(dir, "checkpoint.json"))
			}
		}
		return errors.New("no ack frame found")
	}}
	rep, err := recovery(t.TempDir(), "", recoveryEvents(), hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("divergence: %s", deref(rep.Report.Divergence))
	if rep.Holds() || rep.Report.CursorSurvived || !rep.Report.ZeroLoss || rep.Report.PendingAfterRestart != 3 {
		t.Fatalf("a lost ack was not reported: %+v", rep.Report)
	}
}
