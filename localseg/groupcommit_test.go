package localseg_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestGroupCommit: 64 concurrent appenders (and a batch appender) each get
// distinct, gapless sequences in the order they issued their appends, every
// event is stored under its sequence, and they share fsyncs: fewer segment
// fsyncs than appends.
func TestGroupCommit(t *testing.T) {
	const writers, per = 64, 20
	h := newHookFS()
	dir := t.TempDir()
	s := openT(t, dir, localseg.Options{FS: h, SegmentMaxBytes: 32 << 10})
	syncsBefore := h.syncs()
	var wg sync.WaitGroup
	seqs := make([][]uint64, writers+1)
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				r, err := s.Append(evt(fmt.Sprintf("w%d", w), i))
				if err != nil {
					errs <- err
					return
				}
				seqs[w] = append(seqs[w], r.Seq)
			}
		})
	}
	wg.Go(func() {
		for i := range 5 {
			batch := []localseg.Event{evt("batch", 3*i), evt("batch", 3*i+1), evt("batch", 3*i+2)}
			first, last, err := s.AppendBatch(batch)
			if err != nil {
				errs <- err
				return
			}
			if last != first+2 {
				errs <- fmt.Errorf("batch %d..%d", first, last)
				return
			}
			seqs[writers] = append(seqs[writers], first, first+1, first+2)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := writers*per + 15
	var all []uint64
	for w, ss := range seqs {
		if !slices.IsSorted(ss) {
			t.Fatalf("writer %d got sequences out of order: %v", w, ss)
		}
		all = append(all, ss...)
	}
	slices.Sort(all)
	for i, seq := range all {
		if seq != uint64(i+1) {
			t.Fatalf("sequences not distinct and gapless at %d: %d", i, seq)
		}
	}
	fsyncs := h.syncs() - syncsBefore
	t.Logf("%d appends, %d segment fsyncs", total, fsyncs)
	if fsyncs >= total {
		t.Fatalf("%d fsyncs for %d appends: no group commit", fsyncs, total)
	}
	// Every event is where its sequence says, also after a replay.
	check := func(s *localseg.Store) {
		recs := scanAll(t, s)
		if len(recs) != total {
			t.Fatalf("%d records", len(recs))
		}
		for w, ss := range seqs {
			name := fmt.Sprintf("w%d", w)
			if w == writers {
				name = "batch"
			}
			for i, seq := range ss {
				if want := evt(name, i); recs[seq-1].Payload != want.Payload {
					t.Fatalf("sequence %d holds %q, want %q", seq, recs[seq-1].Payload, want.Payload)
				}
			}
		}
	}
	check(s)
	closeT(t, s)
	s = openT(t, dir, localseg.Options{SegmentMaxBytes: 32 << 10})
	defer closeT(t, s)
	check(s)
}

// TestConcurrentReadsDuringAppends runs readers, consumers and a seal loop
// against appenders (for the race detector, and for the lazy index build
// catching up with appends that land during its replay).
func TestConcurrentReadsDuringAppends(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: 8 << 10}
	s := openT(t, dir, o)
	appendMany(t, s, 200, 7)
	closeT(t, s)
	s = openT(t, dir, o) // trusted checkpoint: the index builds on the first read
	defer closeT(t, s)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	fail := make(chan error, 16)
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				if _, err := s.Append(evt(fmt.Sprintf("c%d", w), i)); err != nil {
					fail <- err
					return
				}
			}
		})
	}
	reader := func(f func() error) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := f(); err != nil {
					fail <- err
					return
				}
			}
		})
	}
	reader(func() error {
		tip := s.Tip()
		p, err := s.Scan(tip-min(tip, 50), 50)
		if err == nil && uint64(len(p.Records)) < min(tip, 50) {
			err = fmt.Errorf("scan below a tip of %d returned %d records", tip, len(p.Records))
		}
		return err
	})
	reader(func() error { _, err := s.ReadExecution("c1", 0, 1000); return err })
	reader(func() error {
		r, err := s.Pull("cons", 10)
		if err == nil && len(r.Records) > 0 {
			_, err = s.Ack("cons", r.Records[len(r.Records)-1].Seq)
		}
		return err
	})
	reader(func() error {
		_, ok, err := s.TailExtent(s.Tip()/2, 4096)
		if err == nil && !ok && s.Tip() > 0 {
			err = errors.New("no tail extent")
		}
		return err
	})
	reader(func() error { _, err := s.Snapshot(); return err })
	reader(func() error { _, err := s.Seal(); time.Sleep(time.Millisecond); return err })
	time.Sleep(50 * time.Millisecond)
	deadline := time.After(2 * time.Minute) // hang guard
	done := make(chan struct{})
	go func() {
		for s.Tip() < 600 {
			time.Sleep(time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
	case err := <-fail:
		close(stop)
		wg.Wait()
		t.Fatal(err)
	case <-deadline:
		t.Fatal("appenders hung")
	}
	close(stop)
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if recs := scanAll(t, s); len(recs) != 600 {
		t.Fatalf("%d records", len(recs))
	}
}

// TestPoison: a write or fsync error fails the appends whose bytes it
// carried and poisons the store: every later write fails with
// ErrPoisoned (and writes nothing) until the store is reopened; reads of
// what was durable still work; the reopened store keeps every acknowledged
// event and continues the sequence. CHECKLIST §1.20 (the RED control, a
// retried fsync that acknowledges lost data, is TestPoisonRedControl on the
// crash-modelling filesystem).
func TestPoison(t *testing.T) {
	cases := []struct {
		name   string
		op     string
		prefix string
		nth    int
		batch  bool // the failing append is a batch
		// durable: the fault comes after the fsync that covered the
		// append, which succeeds; only later writes fail (issue 12,
		// finding 3).
		durable bool
	}{
		{"segment write", "write", "seg-", 0, false, false},
		{"segment fdatasync", "datasync", "seg-", 0, false, false},
		{"segment fdatasync of a batch", "datasync", "seg-", 0, true, false},
		{"checkpoint write", "write", "checkpoint", 0, false, true},
		{"seal truncate", "truncate", "seg-", 0, true, false},
		{"seal fsync", "sync", "seg-", 0, true, false},
		{"create next segment", "create", "seg-", 0, true, false},
		{"directory fsync at rollover", "syncdir", "", 0, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHookFS()
			dir := t.TempDir()
			o := localseg.Options{FS: h, SegmentMaxBytes: 4096}
			s := openT(t, dir, o)
			acked := appendMany(t, s, 5, 2)
			if _, err := s.Pull("c", 1); err != nil {
				t.Fatal(err)
			}
			h.setFail(failNth(c.op, c.prefix, c.nth, syscall.EIO))
			var err error
			if c.batch {
				// Big enough to roll over.
				var evs []localseg.Event
				for i := range 40 {
					evs = append(evs, evt("big", i))
				}
				_, _, err = s.AppendBatch(evs)
			} else {
				_, err = s.Append(evt("victim", 0))
			}
			switch {
			case c.durable && err != nil:
				t.Fatalf("the append whose fsync succeeded: %v, want success", err)
			case !c.durable && (!errors.Is(err, syscall.EIO) || !errors.Is(err, localseg.ErrPoisoned)):
				t.Fatalf("the failing append: %v, want EIO and ErrPoisoned", err)
			}
			h.setFail(nil)
			h.takeLog()
			later := map[string]func() error{
				"append":  func() error { _, err := s.Append(evt("later", 0)); return err },
				"batch":   func() error { _, _, err := s.AppendBatch([]localseg.Event{evt("later", 1)}); return err },
				"ack":     func() error { _, err := s.Ack("c", 1); return err },
				"create":  func() error { _, err := s.Pull("new", 1); return err },
				"delete":  func() error { return s.DeleteConsumer("c") },
				"seal":    func() error { _, err := s.Seal(); return err },
				"reclaim": func() error { _, err := s.Reclaim(1); return err },
				"recovered": func() error {
					return s.AppendRecovered([]localseg.Frame{{Kind: localseg.KindConsumerCreate, Consumer: "x"}})
				},
			}
			for name, op := range later {
				if err := op(); !errors.Is(err, localseg.ErrPoisoned) {
					t.Errorf("%s after the fault: %v, want ErrPoisoned", name, err)
				}
			}
			if log := h.takeLog(); len(log) != 0 {
				t.Errorf("refused writes on a poisoned store touched the files: %v", log)
			}
			// Reads of what was durable still work.
			p, err := s.Scan(0, 5)
			if err != nil {
				t.Fatalf("scan of a poisoned store: %v", err)
			}
			wantRecords(t, p.Records, acked, 1)
			closeT(t, s)

			s = openT(t, dir, localseg.Options{SegmentMaxBytes: 4096})
			defer closeT(t, s)
			recs := scanAll(t, s)
			wantRecords(t, recs[:5], acked, 1)
			if c.durable && (len(recs) != 6 || recs[5].TransactionID != evt("victim", 0).TransactionID) {
				t.Fatalf("after reopen: %d records, want the acknowledged victim last", len(recs))
			}
			if seq := mustAppend(t, s, evt("after", 0)); seq != uint64(len(recs)+1) {
				t.Fatalf("after reopen: sequence %d, want %d", seq, len(recs)+1)
			}
		})
	}
}

// TestPoisonFailsTheWholeGroup: appenders waiting in the group whose fsync
// fails all get the error; none is acknowledged.
func TestPoisonFailsTheWholeGroup(t *testing.T) {
	h := newHookFS()
	s := openT(t, t.TempDir(), localseg.Options{FS: h})
	defer s.Close()
	mustAppend(t, s, evt("e", 0))
	release := make(chan struct{})
	var once sync.Once
	h.setFail(func(op, name string) error {
		if op != "datasync" {
			return nil
		}
		// Hold the first fsync so the other appenders queue behind it,
		// then fail it and every later one.
		once.Do(func() { <-release })
		return syscall.EIO
	})
	var wg sync.WaitGroup
	results := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			_, err := s.Append(evt("g", i))
			results <- err
		})
	}
	time.Sleep(20 * time.Millisecond) // let them queue (the assertions hold either way)
	close(release)
	wg.Wait()
	close(results)
	for err := range results {
		if err == nil {
			t.Fatal("an append was acknowledged although every fsync failed")
		}
		if !errors.Is(err, localseg.ErrPoisoned) {
			t.Fatalf("%v, want ErrPoisoned", err)
		}
	}
}
