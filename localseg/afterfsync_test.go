package localseg_test

// A durable append is never reported as failed (issue 12, finding 3): work
// that runs after the fdatasync covering a group (the checkpoint write, the
// spare segment's preparation, preallocating a new segment, index files)
// must not fail the appends the fdatasync covered, and a failed
// preallocation must not poison the store.

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

func TestDurableAppendIsNeverReportedFailed(t *testing.T) {
	const segMax = 64 << 10
	seg2 := localseg.SegmentFileName(2)
	cases := []struct {
		name string
		// inj fails the operation under test once armed.
		inj func() faultfs.Injector
		// laterOK: appends after the fault must succeed (the fault was in
		// an optimisation); otherwise they may fail with ErrPoisoned.
		laterOK bool
	}{
		{"checkpoint write/ENOSPC", func() faultfs.Injector {
			return faultfs.OnIndex(0, faultfs.ENOSPC, faultfs.And(faultfs.Kinds(faultfs.OpWrite), faultfs.PathContains("checkpoint")))
		}, false},
		{"checkpoint write/EIO", func() faultfs.Injector {
			return faultfs.OnIndex(0, faultfs.EIO, faultfs.And(faultfs.Kinds(faultfs.OpWrite), faultfs.PathContains("checkpoint")))
		}, false},
		{"checkpoint fsync at a seal/EIO", func() faultfs.Injector {
			return faultfs.OnIndex(0, faultfs.EIO, faultfs.And(faultfs.Kinds(faultfs.OpSync), faultfs.PathContains("checkpoint")))
		}, false},
		{"spare write/ENOSPC", func() faultfs.Injector {
			return faultfs.Fail(faultfs.ENOSPC, faultfs.And(faultfs.Kinds(faultfs.OpWrite), faultfs.PathContains("spare")))
		}, true},
		{"spare create/EIO", func() faultfs.Injector {
			return faultfs.Fail(faultfs.EIO, faultfs.And(faultfs.Kinds(faultfs.OpCreate), faultfs.PathContains("spare")))
		}, true},
		{"spare fsync/EIO", func() faultfs.Injector {
			return faultfs.Fail(faultfs.EIO, faultfs.And(faultfs.Kinds(faultfs.OpSync), faultfs.PathContains("spare")))
		}, true},
		{"new segment preallocation/ENOSPC", func() faultfs.Injector {
			// No spare, and the successor's zeros do not fit either.
			return faultfs.Fail(faultfs.ENOSPC, faultfs.Or(
				faultfs.And(faultfs.Kinds(faultfs.OpWrite), faultfs.PathContains("spare")),
				faultfs.Pred(func(op faultfs.Op) bool {
					return op.Kind == faultfs.OpWrite && strings.HasSuffix(op.Path, seg2) && op.Offset == 0 && op.Len == segMax
				})))
		}, true},
		{"index file write/ENOSPC", func() faultfs.Injector {
			return faultfs.Fail(faultfs.ENOSPC, faultfs.And(faultfs.Kinds(faultfs.OpWrite), faultfs.PathContains(".idx")))
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMachine(t)
			tog := faultfs.NewToggle(tc.inj(), false)
			opts := localseg.Options{SegmentMaxBytes: segMax, FS: faultfs.Wrap(mem, tog)}
			s, err := localseg.Open(crashDir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ev := func(i int) localseg.Event {
				return localseg.Event{ExecutionID: "e", TransactionID: fmt.Sprint("txn-", i), Payload: fmt.Sprintf("%04d %s", i, strings.Repeat("p", 1000))}
			}
			acked := map[uint64]string{}
			if _, err := s.Append(ev(0)); err != nil {
				t.Fatal(err)
			}
			acked[1] = ev(0).TransactionID
			tog.On()
			// Enough to fill the first segment past half (the spare) and
			// roll over into the second.
			poisoned := false
			failed := ""
			for i := 1; i < 100; i++ {
				r, err := s.Append(ev(i))
				if err != nil {
					if !tc.laterOK && errors.Is(err, localseg.ErrPoisoned) && len(acked) > 1 {
						// Refused after the fault: it must not be found
						// durable below.
						poisoned, failed = true, ev(i).TransactionID
						break
					}
					t.Fatalf("append %d: %v (the fault is in work after the fsync)", i, err)
				}
				acked[r.Seq] = ev(i).TransactionID
			}
			tog.Off()
			if tc.laterOK && !strings.Contains(tc.name, "index") && localseg.PreallocFailuresForTest(s) == 0 {
				t.Fatal("the fault never fired")
			}
			if !poisoned && !tc.laterOK {
				// The store may carry on, but the fault must have fired.
				t.Logf("the store was not poisoned after the fault")
			}
			if tc.laterOK && len(acked) != 100 {
				t.Fatalf("%d appends acknowledged, want 100", len(acked))
			}
			s.Close()
			for _, fsys := range []struct {
				name string
				fs   localseg.FS
			}{{"reopen", mem}, {"crash", mem.CrashClone(faultfs.CrashOptions{})}} {
				s2, err := localseg.Open(crashDir, localseg.Options{SegmentMaxBytes: segMax, FS: fsys.fs})
				if err != nil {
					t.Fatalf("%s: %v", fsys.name, err)
				}
				p, err := s2.Scan(0, 1000)
				if err != nil {
					t.Fatalf("%s: scan: %v", fsys.name, err)
				}
				seen := map[string]int{}
				for _, r := range p.Records {
					seen[r.TransactionID]++
				}
				for seq, txn := range acked {
					if seen[txn] != 1 {
						t.Errorf("%s: acknowledged event %d (%s) found %d times", fsys.name, seq, txn, seen[txn])
					}
				}
				if failed != "" && seen[failed] != 0 {
					t.Errorf("%s: the append reported failed (%s) is durable: a retry would store it twice", fsys.name, failed)
				}
				if len(p.Records) < len(acked) {
					t.Errorf("%s: %d records, %d acknowledged", fsys.name, len(p.Records), len(acked))
				}
				s2.Close()
			}
		})
	}
}

// TestRolloverFailureKeepsTheSealedFramesAcknowledged: a group whose first
// frames fill the active segment and whose rollover then fails after the
// seal's fsync (the successor cannot be created) made those frames durable;
// their appenders are answered with success, the others fail, and the store
// is poisoned for later appends.
func TestRolloverFailureKeepsTheSealedFramesAcknowledged(t *testing.T) {
	const segMax = 64 << 10
	mem := newMachine(t)
	seg2 := localseg.SegmentFileName(2)
	release := make(chan struct{})
	var blockOn, failOn atomic.Bool
	var blocked atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if blockOn.Load() && op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, localseg.SegmentFileName(1)) && blocked.CompareAndSwap(false, true) {
			<-release
		}
		if failOn.Load() && (strings.HasSuffix(op.Path, seg2) || strings.HasSuffix(op.NewPath, seg2)) {
			return faultfs.EIO
		}
		return nil
	})
	s, err := localseg.Open(crashDir, localseg.Options{SegmentMaxBytes: segMax, FS: faultfs.Wrap(mem, inj)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev := func(tag string) localseg.Event {
		return localseg.Event{ExecutionID: "e", TransactionID: "txn-" + tag, Payload: strings.Repeat("p", 1000)}
	}
	const frame = 1100 // above any one frame of ev
	active := func() int64 {
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return snap.Segments[len(snap.Segments)-1].Size
	}
	for i := 0; segMax-active() >= 3*frame; i++ {
		if _, err := s.Append(ev(fmt.Sprint("fill-", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Make the room left hold exactly two more frames after A.
	for segMax-active() >= 2*frame+frame/2 {
		if _, err := s.Append(ev("pad")); err != nil {
			t.Fatal(err)
		}
	}
	blockOn.Store(true)
	type res struct {
		tag string
		seq uint64
		err error
	}
	out := make(chan res, 3)
	appendAsync := func(tag string) {
		go func() {
			r, err := s.Append(ev(tag))
			out <- res{tag, r.Seq, err}
		}()
	}
	appendAsync("A")
	for !blocked.Load() {
		time.Sleep(time.Millisecond)
	}
	appendAsync("B")
	appendAsync("C")
	time.Sleep(50 * time.Millisecond) // B and C queue behind A's fsync
	failOn.Store(true)
	close(release)
	got := map[string]res{}
	for range 3 {
		r := <-out
		got[r.tag] = r
	}
	failOn.Store(false)
	if got["A"].err != nil {
		t.Fatalf("A: %v", got["A"].err)
	}
	var ok, failed []res
	for _, tag := range []string{"B", "C"} {
		if got[tag].err == nil {
			ok = append(ok, got[tag])
		} else {
			failed = append(failed, got[tag])
		}
	}
	s.Close()
	s2, err := localseg.Open(crashDir, localseg.Options{SegmentMaxBytes: segMax, FS: mem.CrashClone(faultfs.CrashOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	p, err := s2.Scan(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range p.Records {
		seen[r.TransactionID] = true
	}
	for _, r := range failed {
		if seen["txn-"+r.tag] {
			t.Errorf("%s was reported failed (%v) but is durable: a retry would store it twice", r.tag, r.err)
		}
	}
	for _, r := range ok {
		if !seen["txn-"+r.tag] {
			t.Errorf("%s was acknowledged at %d but is lost", r.tag, r.seq)
		}
	}
	if len(ok) != 1 || len(failed) != 1 {
		t.Fatalf("acknowledged %v, failed %v: want the one in the sealed segment acknowledged and the other failed", ok, failed)
	}
}

// TestRolloverFailureReportsTheBatchsDurablePrefix (found by the
// simulation, seeds 16 35 130 169): a batch whose first events fill the
// active segment and whose rollover then fails after the seal's fsync (the
// successor cannot be created) made that prefix durable. The error comes
// with first..last naming exactly the durable prefix, so a caller neither
// retries it (storing it twice) nor takes it for lost.
func TestRolloverFailureReportsTheBatchsDurablePrefix(t *testing.T) {
	const segMax = 64 << 10
	mem := newMachine(t)
	seg2 := localseg.SegmentFileName(2)
	var failOn atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if failOn.Load() && (strings.HasSuffix(op.Path, seg2) || strings.HasSuffix(op.NewPath, seg2)) {
			return faultfs.EIO
		}
		return nil
	})
	s, err := localseg.Open(crashDir, localseg.Options{SegmentMaxBytes: segMax, NoPreallocate: true, FS: faultfs.Wrap(mem, inj)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev := func(tag string) localseg.Event {
		return localseg.Event{ExecutionID: "e", TransactionID: "txn-" + tag, Payload: strings.Repeat("p", 1000)}
	}
	const frame = 1100 // above any one frame of ev
	for i := 0; ; i++ {
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if segMax-snap.Segments[len(snap.Segments)-1].Size < 3*frame {
			break
		}
		if _, err := s.Append(ev(fmt.Sprint("fill-", i))); err != nil {
			t.Fatal(err)
		}
	}
	tip := s.Tip()
	failOn.Store(true)
	batch := []localseg.Event{ev("b0"), ev("b1"), ev("b2"), ev("b3"), ev("b4")}
	first, last, berr := s.AppendBatch(batch)
	failOn.Store(false)
	if berr == nil {
		t.Fatal("the batch succeeded although its rollover failed")
	}
	s.Close()
	s2, err := localseg.Open(crashDir, localseg.Options{SegmentMaxBytes: segMax, FS: mem.CrashClone(faultfs.CrashOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	durable := s2.Tip() - tip
	if durable == 0 || durable >= uint64(len(batch)) {
		t.Fatalf("%d events of the batch are durable, want a proper prefix (the test's premise)", durable)
	}
	if first != tip+1 || last != tip+durable {
		t.Fatalf("AppendBatch answered %d..%d with %v; events %d..%d of it are durable", first, last, berr, tip+1, tip+durable)
	}
	// The error names the durable prefix by its sequences.
	if want := fmt.Sprintf("(sequences %d..%d of the batch are durable, the rest were not written)", tip+1, tip+durable); !strings.Contains(berr.Error(), want) {
		t.Fatalf("the error %q does not name the durable prefix as %q", berr, want)
	}
}

// TestFailedSealCheckpointKeepsTheRestOutOfTheSuccessor (found by the
// simulation, seed 438): the checkpoint a seal rewrites is the durable
// record that the successor segment exists. When that write fails, the
// rest of the group is not written into the successor: an acknowledged
// event there would have no evidence, and losing that one file would give
// a shorter log that Open cannot tell from the whole one. The sealed prefix
// stays acknowledged (reported with the error), the rest fails.
func TestFailedSealCheckpointKeepsTheRestOutOfTheSuccessor(t *testing.T) {
	const segMax = 64 << 10
	mem := newMachine(t)
	var failOn atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if failOn.Load() && op.Kind == faultfs.OpWrite && strings.HasSuffix(op.Path, "checkpoint.json") {
			return faultfs.EIO
		}
		return nil
	})
	s, err := localseg.Open(crashDir, localseg.Options{SegmentMaxBytes: segMax, FS: faultfs.Wrap(mem, inj)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev := func(tag string) localseg.Event {
		return localseg.Event{ExecutionID: "e", TransactionID: "txn-" + tag, Payload: strings.Repeat("p", 1000)}
	}
	const frame = 1100 // above any one frame of ev
	for i := 0; ; i++ {
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if segMax-snap.Segments[len(snap.Segments)-1].Size < 3*frame {
			break
		}
		if _, err := s.Append(ev(fmt.Sprint("fill-", i))); err != nil {
			t.Fatal(err)
		}
	}
	tip := s.Tip()
	failOn.Store(true)
	first, last, berr := s.AppendBatch([]localseg.Event{ev("b0"), ev("b1"), ev("b2"), ev("b3"), ev("b4")})
	failOn.Store(false)
	acked := last // the batch, or the durable prefix its error names
	if first == 0 {
		acked = tip
	}
	s.Close()
	// The successor segment is lost with the disk's newest file.
	crashed := mem.CrashClone(faultfs.CrashOptions{})
	_ = crashed.Remove(crashDir + "/" + localseg.SegmentFileName(2))
	s2, err := localseg.Open(crashDir, localseg.Options{SegmentMaxBytes: segMax, FS: crashed})
	if err != nil {
		return // refused: the loss is seen
	}
	defer s2.Close()
	if s2.Tip() < acked {
		t.Fatalf("the batch was answered %d..%d (%v); with segment 2 lost the store opens at tip %d without complaint", first, last, berr, s2.Tip())
	}
}
