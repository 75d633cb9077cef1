package localseg_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// Retry-safe appends: the transaction window (txwindow.go).

func txnEvent(i int) localseg.Event {
	return localseg.Event{ExecutionID: fmt.Sprintf("x%d", i%7), TransactionID: fmt.Sprintf("tx-%d", i), Payload: fmt.Sprintf("payload %d <é>", i)}
}

// countTxn counts the records holding transaction id txn.
func countTxn(t testing.TB, s *localseg.Store, txn string) int {
	t.Helper()
	n := 0
	for _, r := range scanAll(t, s) {
		if r.TransactionID == txn {
			n++
		}
	}
	return n
}

// mustDuplicate retries ev and requires the original outcome at seq.
func mustDuplicate(t testing.TB, s *localseg.Store, ev localseg.Event, seq uint64) {
	t.Helper()
	tip := s.Tip()
	r, err := s.Append(ev)
	if err != nil || !r.Duplicate || r.Seq != seq || s.Tip() != tip {
		t.Fatalf("retry of %s: %+v %v (tip %d -> %d), want the duplicate of %d", ev.TransactionID, r, err, tip, s.Tip(), seq)
	}
}

// mustBeNew appends ev and requires it written at the next sequence.
func mustBeNew(t testing.TB, s *localseg.Store, ev localseg.Event) uint64 {
	t.Helper()
	tip := s.Tip()
	r, err := s.Append(ev)
	if err != nil || r.Duplicate || r.Seq != tip+1 {
		t.Fatalf("append of %s: %+v %v, want new at %d", ev.TransactionID, r, err, tip+1)
	}
	return r.Seq
}

func TestDedupRetryAndConflict(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{})
	defer closeT(t, s)
	for i := range 5 {
		mustBeNew(t, s, txnEvent(i))
	}
	mustDuplicate(t, s, txnEvent(2), 3)
	mustDuplicate(t, s, txnEvent(0), 1)
	if r, _ := s.Append(txnEvent(0)); !r.Created {
		t.Fatalf("the retry of the shard's first event answers its outcome: %+v", r)
	}

	other := txnEvent(2)
	other.Payload = "something else"
	otherExec := txnEvent(2)
	otherExec.ExecutionID = "elsewhere"
	for _, ev := range []localseg.Event{other, otherExec} {
		r, err := s.Append(ev)
		if !errors.Is(err, localseg.ErrTransactionConflict) || !errors.Is(err, localseg.ErrInvalidState) ||
			!strings.Contains(err.Error(), "sequence 3") || r.Seq != 0 || s.Tip() != 5 {
			t.Fatalf("conflicting reuse of tx-2: %+v %v, tip %d", r, err, s.Tip())
		}
	}
	// A transaction id differs from another by its bytes: not trimmed.
	spaced := txnEvent(1)
	spaced.TransactionID = " " + spaced.TransactionID
	mustBeNew(t, s, spaced)
	if n := countTxn(t, s, "tx-2"); n != 1 {
		t.Fatalf("tx-2 stored %d times", n)
	}
}

// The RED control: with the window off, the retry is written twice.
func TestDedupOffWritesTwice(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{TransactionWindow: -1})
	defer closeT(t, s)
	for range 3 {
		if r, err := s.Append(txnEvent(1)); err != nil || r.Duplicate {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if n := countTxn(t, s, "tx-1"); n != 3 {
		t.Fatalf("without the window 3 retries store %d copies, want 3 (the loss the window prevents)", n)
	}
	t.Logf("RED control: window off, 3 appends of one transaction id stored %d copies", countTxn(t, s, "tx-1"))
}

func TestDedupBatch(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{})
	defer closeT(t, s)
	for i := range 3 {
		mustBeNew(t, s, txnEvent(i))
	}
	// New, duplicate of 2, new, repeat of the batch's first, new.
	evs := []localseg.Event{txnEvent(10), txnEvent(1), txnEvent(11), txnEvent(10), txnEvent(12)}
	r, err := s.AppendEvents(evs)
	want := []localseg.Duplicate{{Index: 1, Seq: 2}, {Index: 3, Seq: 4}}
	if err != nil || r.First != 4 || r.Last != 6 || fmt.Sprint(r.Duplicates) != fmt.Sprint(want) || s.Tip() != 6 {
		t.Fatalf("batch: %+v %v, tip %d; want 4..6 with duplicates %v", r, err, s.Tip(), want)
	}
	// The whole batch again: every event a duplicate, nothing written.
	r, err = s.AppendEvents(evs)
	if err != nil || r.First != 0 || r.Last != 0 || len(r.Duplicates) != 5 || r.Duplicates[4].Seq != 6 || s.Tip() != 6 {
		t.Fatalf("batch again: %+v %v, tip %d", r, err, s.Tip())
	}
	if first, last, err := s.AppendBatch(evs); err != nil || first != 0 || last != 0 {
		t.Fatalf("AppendBatch of duplicates: %d..%d %v", first, last, err)
	}
	// A conflict anywhere refuses the whole batch, naming event and sequence.
	bad := txnEvent(11)
	bad.Payload = "changed"
	for _, evs := range [][]localseg.Event{
		{txnEvent(20), bad},
		{txnEvent(21), txnEvent(22), {ExecutionID: "x1", TransactionID: "tx-21", Payload: "not the same"}},
	} {
		r, err := s.AppendEvents(evs)
		if !errors.Is(err, localseg.ErrTransactionConflict) || !strings.Contains(err.Error(), "event ") || s.Tip() != 6 || r.First != 0 {
			t.Fatalf("conflicting batch: %+v %v, tip %d", r, err, s.Tip())
		}
	}
	mustBeNew(t, s, txnEvent(20)) // the refused batch wrote nothing
}

// Two appends of one transaction id racing (into one group, or one batch
// against a single) are written once; every caller gets the one sequence.
// Run with -race.
func TestDedupConcurrent(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{})
	defer closeT(t, s)
	const rounds, racers = 50, 8
	for round := range rounds {
		ev := txnEvent(1000 + round)
		seqs := make([]uint64, racers)
		dups := make([]bool, racers)
		var wg sync.WaitGroup
		for g := range racers {
			wg.Go(func() {
				if g%4 == 3 {
					// A batch holding the id and an event of its own.
					r, err := s.AppendEvents([]localseg.Event{txnEvent(100000 + round*racers + g), ev})
					if err != nil {
						t.Error(err)
						return
					}
					if len(r.Duplicates) == 1 {
						seqs[g], dups[g] = r.Duplicates[0].Seq, true
					} else {
						seqs[g] = r.Last
					}
					return
				}
				r, err := s.Append(ev)
				if err != nil {
					t.Error(err)
				}
				seqs[g], dups[g] = r.Seq, r.Duplicate
			})
		}
		wg.Wait()
		written := 0
		for g := range racers {
			if seqs[g] != seqs[0] {
				t.Fatalf("round %d: racers got sequences %v", round, seqs)
			}
			if !dups[g] {
				written++
			}
		}
		if written != 1 {
			t.Fatalf("round %d: %d racers were told their append was written (%v)", round, written, dups)
		}
	}
	for round := range rounds {
		if n := countTxn(t, s, txnEvent(1000+round).TransactionID); n != 1 {
			t.Fatalf("round %d: the id is stored %d times", round, n)
		}
	}
}

// The window spans segments, and a reopen rebuilds it (from the trusted
// checkpoint's O(1) open, and after a full replay).
func TestDedupAcrossRolloverAndRestart(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: 1024}
	s := openT(t, dir, o)
	for i := range 200 {
		mustBeNew(t, s, txnEvent(i))
	}
	if snap, _ := s.Snapshot(); len(snap.Segments) < 10 {
		t.Fatalf("only %d segments", len(snap.Segments))
	}
	mustDuplicate(t, s, txnEvent(0), 1) // segment 1, from the active one's writer
	closeT(t, s)

	for _, mode := range []string{"checkpoint", "replay"} {
		if mode == "replay" {
			if err := os.Remove(filepath.Join(dir, "checkpoint.json")); err != nil {
				t.Fatal(err)
			}
		}
		s = openT(t, dir, o)
		if rep := s.OpenReport(); rep.Replayed != (mode == "replay") {
			t.Fatalf("%s: replayed %v", mode, rep.Replayed)
		}
		for _, i := range []int{0, 57, 198, 199} {
			mustDuplicate(t, s, txnEvent(i), uint64(i+1))
		}
		bad := txnEvent(57)
		bad.Payload = "x"
		if _, err := s.Append(bad); !errors.Is(err, localseg.ErrTransactionConflict) || !strings.Contains(err.Error(), "sequence 58") {
			t.Fatalf("%s: %v", mode, err)
		}
		closeT(t, s)
	}
}

// The window holds the newest N events: after a reopen (rebuilt from the
// newest frames backwards) exactly as before it.
func TestDedupWindowIsTheNewest(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: 1024, TransactionWindow: 20}
	s := openT(t, dir, o)
	for i := range 100 {
		mustBeNew(t, s, txnEvent(i))
	}
	check := func(s *localseg.Store, what string) {
		t.Helper()
		// 100 events, window 20: ids of events 81..100 (i = 80..99).
		if n := localseg.TxWindowLenForTest(s); n != 20 {
			t.Fatalf("%s: window holds %d", what, n)
		}
		mustDuplicate(t, s, txnEvent(80), 81)
		mustDuplicate(t, s, txnEvent(99), 100)
	}
	check(s, "live")
	closeT(t, s)
	s = openT(t, dir, o)
	check(s, "reopened")
	// Beyond the window an id is forgotten: written anew (documented).
	seq := mustBeNew(t, s, txnEvent(3))
	mustDuplicate(t, s, txnEvent(3), seq)
	closeT(t, s)
}

// After a reclaim the window is the newest events above the base, live and
// after a reopen: a retry of a reclaimed event is written anew.
func TestDedupAfterReclaim(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: 1024}
	s := openT(t, dir, o)
	for i := range 60 {
		mustBeNew(t, s, txnEvent(i))
	}
	snap, _ := s.Snapshot()
	through := snap.Segments[2]
	res, err := s.Reclaim(through.ID)
	if err != nil || res.ThroughSeq != through.LastSeq {
		t.Fatalf("reclaim: %+v %v", res, err)
	}
	base := res.ThroughSeq
	check := func(s *localseg.Store) {
		t.Helper()
		mustDuplicate(t, s, txnEvent(int(base)), base+1) // the first retained
		mustDuplicate(t, s, txnEvent(59), 60)
	}
	check(s)
	if n := localseg.TxWindowLenForTest(s); n != int(60-base) {
		t.Fatalf("window holds %d after the reclaim through %d, want %d", n, base, 60-base)
	}
	closeT(t, s)
	s = openT(t, dir, o)
	defer closeT(t, s)
	check(s)
	seq := mustBeNew(t, s, txnEvent(int(base)-1)) // reclaimed: forgotten
	mustDuplicate(t, s, txnEvent(int(base)-1), seq)
}

// A crash (faultfs CrashClone: only what was fsynced survives) loses no
// acknowledged transaction id: the recovered store answers their retries
// with the acknowledged sequences.
func TestDedupAfterCrash(t *testing.T) {
	m := newMachine(t)
	o := localseg.Options{FS: m, SegmentMaxBytes: 2048}
	s, err := localseg.Open(crashDir, o)
	if err != nil {
		t.Fatal(err)
	}
	acked := map[int]uint64{}
	for i := range 80 {
		r, err := s.Append(txnEvent(i))
		if err != nil {
			t.Fatal(err)
		}
		acked[i] = r.Seq
	}
	for _, torn := range []bool{false, true} {
		clone := m.CrashClone(faultfs.CrashOptions{Torn: torn, Seed: 7})
		o2 := o
		o2.FS = clone
		s2, err := localseg.Open(crashDir, o2)
		if err != nil {
			t.Fatal(err)
		}
		for i, seq := range acked {
			mustDuplicate(t, s2, txnEvent(i), seq)
		}
		closeT(t, s2)
	}
	closeT(t, s)
}
