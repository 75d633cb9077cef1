package localseg_test

// Filesystem faults (docs/FORMAT.md §4.1; CHECKLIST §1.20): a write or fsync
// error poisons the shard, nothing unacknowledged is reported acknowledged,
// and a reopen (on the same filesystem, whose page cache may hold bytes that
// never reached the disk, or after a crash) recovers every acknowledged
// event. The fault sweep fails the n-th operation of a kind for every n, so
// it lands in every step of append, rollover, seal, checkpoint write, consumer
// frames and reclaim.

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// faultWorkload is sequential, so the n-th operation of a kind is the same
// operation in every run.
func faultWorkload() workload {
	return workload{
		appenders:      2,
		opsPerAppender: 8,
		concurrent:     false,
		opts:           localseg.Options{SegmentMaxBytes: 4096},
		seed:           3,
		tailAppends:    8,
	}
}

// faultSite names where in the store a failed operation was.
func faultSite(op faultfs.Op) string {
	switch p := op.Path + " " + op.NewPath; {
	case strings.Contains(p, ".idx"):
		return "index file"
	case strings.Contains(p, "seg-"):
		return "segment"
	case strings.Contains(p, "checkpoint"):
		return "checkpoint"
	case strings.Contains(p, "reclaim"):
		return "reclaim manifest"
	}
	return "other"
}

func TestFaultSweep(t *testing.T) {
	cases := []struct {
		name   string
		kinds  []faultfs.OpKind
		err    error
		errno  syscall.Errno
		poison bool // the spec requires poisoning for this kind of fault
	}{
		{"write/ENOSPC", []faultfs.OpKind{faultfs.OpWrite}, faultfs.ENOSPC, syscall.ENOSPC, true},
		{"write/EIO", []faultfs.OpKind{faultfs.OpWrite}, faultfs.EIO, syscall.EIO, true},
		{"fsync/ENOSPC", []faultfs.OpKind{faultfs.OpSync}, faultfs.ENOSPC, syscall.ENOSPC, true},
		{"fsync/EIO", []faultfs.OpKind{faultfs.OpSync}, faultfs.EIO, syscall.EIO, true},
		// Failures of the other write-class operations: the store may
		// poison or carry on, but what it acknowledges must be durable.
		{"metadata/EIO", []faultfs.OpKind{faultfs.OpCreate, faultfs.OpSyncDir, faultfs.OpRename, faultfs.OpTruncate, faultfs.OpAllocate, faultfs.OpRemove, faultfs.OpMkdir}, faultfs.EIO, syscall.EIO, false},
	}
	total := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.name != "write/ENOSPC" && tc.name != "fsync/EIO" && tc.name != "metadata/EIO" {
				t.Skip("-short: one errno per kind")
			}
			sites := map[string]int{}
			n := int64(0)
			for ; ; n++ {
				op, fired := faultRun(t, tc.kinds, tc.err, tc.errno, tc.poison, n)
				if !fired {
					break
				}
				sites[faultSite(op)]++
			}
			total += int(n)
			t.Logf("faults injected: %d (by site: %v)", n, sites)
			if tc.poison && (sites["segment"] == 0 || sites["checkpoint"] == 0 || sites["reclaim manifest"] == 0) {
				t.Errorf("the sweep missed a site: %v", sites)
			}
		})
	}
	t.Logf("faults injected in all: %d", total)
}

// faultRun runs the fault workload with the n-th operation of kinds failing,
// and checks the store's answer. It reports the failed operation, or false
// when the workload had fewer than n+1 such operations.
func faultRun(t *testing.T, kinds []faultfs.OpKind, ferr error, errno syscall.Errno, poison bool, n int64) (faultfs.Op, bool) {
	t.Helper()
	w := faultWorkload()
	mem := newMachine(t)
	inj := faultfs.OnIndex(n, ferr, faultfs.Kinds(kinds...))
	h := newHistory()
	fired := func() bool { _, f := inj.Fired(); return f }
	var s *localseg.Store
	runWithHangGuard(t, fmt.Sprintf("fault %d", n), func() {
		s = runWorkload(faultfs.Wrap(mem, inj), w, h, fired, false)
	})
	op, ok := inj.Fired()
	if errs := h.unexpectedErrs(); len(errs) > 0 {
		t.Fatalf("fault %d: the store failed before the fault: %s", n, strings.Join(errs, "; "))
	}
	if !ok {
		if s != nil {
			if err := s.Close(); err != nil {
				t.Fatalf("close after a clean run: %v", err)
			}
		}
		return op, false
	}
	where := fmt.Sprintf("fault %d (%v on %v, %s)", n, errno, op, faultSite(op))
	// An index file is a cache (segindex.go), and the spare segment and
	// preallocation are optimisations (spare.go): failing to write one
	// must not take the shard down.
	cache := faultSite(op) == "index file" || (s != nil && localseg.PreallocFailuresForTest(s) > 0)
	poison = poison && !cache

	// The error surfaced as the system call's errno, and the store is
	// poisoned: a later append fails with ErrPoisoned and writes nothing.
	h.mu.Lock()
	surfaced := false
	for _, e := range h.errs {
		surfaced = surfaced || errors.Is(e.err, errno) || errors.Is(e.err, localseg.ErrPoisoned)
	}
	h.mu.Unlock()
	if s != nil {
		mutations := mem.Mutations()
		err := h.appendEvents(s, -2, int(n), []localseg.Event{probeEvent(fmt.Sprintf("poisoned-%d", n))})
		switch {
		case cache && err != nil:
			t.Fatalf("%s: append after a failed index file write or preallocation: %v, want success", where, err)
		case poison && !errors.Is(err, localseg.ErrPoisoned):
			t.Fatalf("%s: append after the fault: %v, want ErrPoisoned (errors seen: %v)", where, err, h.errs)
		case poison && mem.Mutations() != mutations:
			t.Fatalf("%s: the refused append on a poisoned store changed the filesystem", where)
		}
		s.Close() // releases the lock; its error is the poison's business
	} else if poison && !surfaced {
		t.Fatalf("%s: Open failed without the fault's error: %v", where, h.errs)
	}

	// A crash now: every acknowledged event is on disk.
	for seed := range uint64(min(tornSeeds(), 2) + 1) { // the durable clone and one or two torn ones
		opts := faultfs.CrashOptions{Torn: seed > 0, Seed: uint64(n)*8 + seed}
		if _, err := verifyRecovery(mem.CrashClone(opts), w, h); err != nil {
			t.Fatalf("%s, crash clone %+v: %v", where, opts, err)
		}
	}
	// A reopen on the same filesystem, whose page cache may hold bytes the
	// failed fsync never wrote: what the reopened store keeps and then
	// builds on must survive a later crash (verifyRecovery crashes after
	// its append).
	if _, err := verifyRecovery(mem, w, h); err != nil {
		t.Fatalf("%s, reopen without a crash: %v", where, err)
	}
	return op, true
}

// TestPoisonRedControl is the RED control of the poison rule (CHECKLIST
// §1.20): with the store's unsafe knob set, a failed fsync is retried and the
// append acknowledged; Linux dropped the dirty pages, the retry reports
// success, and after a crash the acknowledged event is gone. With the
// default (poison) the append fails and nothing acknowledged is lost.
func TestPoisonRedControl(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsafe-retry=%v", unsafe), func(t *testing.T) {
			mem := newMachine(t)
			fail := faultfs.NewToggle(faultfs.OnIndex(0, faultfs.EIO, faultfs.And(
				faultfs.Kinds(faultfs.OpSync), faultfs.PathContains("seg-"))), false)
			w := workload{opts: localseg.Options{SegmentMaxBytes: 1 << 20}}
			s, err := localseg.Open(crashDir, w.options(faultfs.Wrap(mem, fail)))
			if err != nil {
				t.Fatal(err)
			}
			if unsafe {
				localseg.SetUnsafeRetryFsyncForTest(s)
			}
			h := newHistory()
			for i := range 5 {
				if err := h.appendEvents(s, 0, i, []localseg.Event{probeEvent(fmt.Sprint("before-", i))}); err != nil {
					t.Fatal(err)
				}
			}
			fail.On()
			// The victim spans several sectors, so no later write can
			// re-dirty all of it by sharing a sector.
			victim := localseg.Event{ExecutionID: "victim", TransactionID: "txn-victim", Payload: "victim " + strings.Repeat("x", 2*faultfs.SectorSize)}
			err = h.appendEvents(s, 0, 5, []localseg.Event{victim})
			switch {
			case unsafe && err != nil:
				t.Fatalf("with the unsafe retry the append failed: %v (the knob does nothing)", err)
			case !unsafe && !errors.Is(err, syscall.EIO) && !errors.Is(err, localseg.ErrPoisoned):
				t.Fatalf("append whose fsync failed: %v, want the EIO or ErrPoisoned", err)
			}
			next := h.appendEvents(s, 0, 6, []localseg.Event{probeEvent("after")})
			if !unsafe && !errors.Is(next, localseg.ErrPoisoned) {
				t.Fatalf("append after a failed fsync: %v, want ErrPoisoned", next)
			}
			s.Close()

			clone := mem.CrashClone(faultfs.CrashOptions{})
			s2, err := localseg.Open(crashDir, w.options(clone))
			if err != nil {
				t.Fatalf("reopen after the crash: %v", err)
			}
			defer s2.Close()
			st, err := readState(s2)
			if err != nil {
				t.Fatal(err)
			}
			lossErr := checkAgainst(s2, st, h)
			if unsafe {
				// RED: the acknowledged victim is gone.
				if lossErr == nil || !strings.Contains(lossErr.Error(), "LOSS") {
					t.Fatalf("with the unsafe retry no acknowledged event was lost (%v): the control shows nothing", lossErr)
				}
				for _, r := range st.records {
					if r.Payload == victim.Payload {
						t.Fatal("the victim survived the crash although its pages were dropped")
					}
				}
				t.Logf("RED as expected: %v", lossErr)
				return
			}
			if lossErr != nil {
				t.Fatalf("with poisoning: %v", lossErr)
			}
		})
	}
}
