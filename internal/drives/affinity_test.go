package drives

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/internal/routed"
	"github.com/bucketlog/bucketlog/localseg"
)

// TestAffinityDriveHolds: the drive holds with 2 and 4 shards, and with 2
// its JSON is the seed's (CHECKLIST §2.7).
func TestAffinityDriveHolds(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			rep, err := Affinity(filepath.Join(t.TempDir(), "pool"), n)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Holds() || !rep.SingleWriterHolds {
				t.Fatalf("drive does not hold: %+v (divergence %v)", rep.Report, deref(rep.Report.Divergence))
			}
			d := rep.Report
			if d.ShardCount != n || d.Executions != 2*n || d.OwnerAppends != 2*n || d.NonownerRefusals != 2*n*(n-1) {
				t.Fatalf("counts %+v", d)
			}
			if n == 2 {
				want := `{"single_writer_holds":true,"report":{"shard_count":2,"executions":4,"owner_appends":4,"nonowner_refusals":4,"owner_writes_ok":true,"nonowner_refused_ok":true,"single_writer_invariant":true,"coldload_read_ok":true,"crash_recovery_ok":true,"divergence":null}}`
				if got := mustJSON(t, rep); got != want {
					t.Fatalf("JSON\n got %s\nwant %s", got, want)
				}
			}
		})
	}
}

// TestAffinityDriveRefuses: a single shard (or fewer), too many shards, an
// empty root and a used root are refused (CHECKLIST §2.7).
func TestAffinityDriveRefuses(t *testing.T) {
	for _, n := range []int{1, 0, -2, MaxAffinityShards + 1} {
		root := filepath.Join(t.TempDir(), "pool")
		if _, err := Affinity(root, n); !errors.Is(err, ErrUsage) {
			t.Errorf("%d shards: err = %v, want ErrUsage", n, err)
		}
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%d shards: a refused drive created its root", n)
		}
	}
	if _, err := Affinity("", 2); !errors.Is(err, ErrUsage) {
		t.Errorf("empty root: err = %v", err)
	}
	used := t.TempDir()
	os.Mkdir(filepath.Join(used, "shard-0000"), 0o755)
	if _, err := Affinity(used, 2); !errors.Is(err, ErrUsage) {
		t.Errorf("used root: err = %v", err)
	}
}

// leaky is a broken router: instead of refusing an execution it does not
// own, it writes it into its own shard.
type leaky struct{ *routed.Log }

func (l leaky) Append(ev localseg.Event) (localseg.AppendResult, error) {
	r, err := l.Log.Append(ev)
	if errors.Is(err, affinity.ErrNotOwner) {
		return l.Log.Store().Append(ev)
	}
	return r, err
}

// TestAffinityDriveRedLeakyRouter is the RED control of the single-writer
// drive: a non-owner write that sneaks through is caught (refusals,
// single-writer invariant) and the drive does not hold.
func TestAffinityDriveRedLeakyRouter(t *testing.T) {
	rep, err := affinityDrive(t.TempDir(), 2, affinityHooks{wrap: func(l *routed.Log) replica { return leaky{l} }})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Report
	t.Logf("divergence: %s", deref(d.Divergence))
	if rep.Holds() || rep.SingleWriterHolds || d.NonownerRefusedOK || d.SingleWriterInvariant || d.NonownerRefusals != 0 || d.Divergence == nil {
		t.Fatalf("a leaking router was not caught: %+v", d)
	}
}

// staleCold serves non-owner reads from nowhere: every cold load is empty.
type staleCold struct{ *routed.Log }

func (s staleCold) Read(id string, after uint64, limit int) (routed.ReadResult, error) {
	r, err := s.Log.Read(id, after, limit)
	if r.ServedBy == affinity.ServedByNonOwnerColdLoad {
		r.Page = localseg.Page{Base: 1}
	}
	return r, err
}

// TestAffinityDriveRedStaleColdLoad: a cold load that does not see the
// owner's data is caught.
func TestAffinityDriveRedStaleColdLoad(t *testing.T) {
	rep, err := affinityDrive(t.TempDir(), 2, affinityHooks{wrap: func(l *routed.Log) replica { return staleCold{l} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("divergence: %s", deref(rep.Report.Divergence))
	if rep.Holds() || rep.Report.ColdloadReadOK || rep.Report.Divergence == nil {
		t.Fatalf("a stale cold load was not caught: %+v", rep.Report)
	}
}

// TestAffinityDriveRedCorruptBeforeRecovery: a segment damaged during the
// restart makes the crash-recovery check fail.
func TestAffinityDriveRedCorruptBeforeRecovery(t *testing.T) {
	hooks := affinityHooks{beforeRecovery: func(root string) error {
		return flipByte(firstSegment(localseg.ShardDir(root, 1)))
	}}
	rep, err := affinityDrive(t.TempDir(), 2, hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("divergence: %s", deref(rep.Report.Divergence))
	if rep.Holds() || rep.Report.CrashRecoveryOK || rep.Report.Divergence == nil {
		t.Fatalf("a corrupt segment at recovery was not caught: %+v", rep.Report)
	}
	if !rep.Report.OwnerWritesOK || !rep.Report.ColdloadReadOK {
		t.Fatalf("checks before the damage should hold: %+v", rep.Report)
	}
}

// writeThenRefuse is a subtler broken router: it reports the refusal the
// caller expects, but only after writing the event into its own shard.
type writeThenRefuse struct{ *routed.Log }

func (w writeThenRefuse) Append(ev localseg.Event) (localseg.AppendResult, error) {
	r, err := w.Log.Append(ev)
	if errors.Is(err, affinity.ErrNotOwner) {
		if _, werr := w.Log.Store().Append(ev); werr != nil {
			return r, werr
		}
	}
	return r, err
}

// TestAffinityDriveRedRefusalWithSideEffect: a refusal that leaves bytes
// behind is caught by the drive's disk comparison, even though the error
// the caller sees is the right one.
func TestAffinityDriveRedRefusalWithSideEffect(t *testing.T) {
	rep, err := affinityDrive(t.TempDir(), 2, affinityHooks{wrap: func(l *routed.Log) replica { return writeThenRefuse{l} }})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Report
	t.Logf("divergence: %s", deref(d.Divergence))
	if rep.Holds() || d.NonownerRefusedOK || d.NonownerRefusals != 4 || d.Divergence == nil {
		t.Fatalf("a refusal with a side effect was not caught: %+v", d)
	}
}
