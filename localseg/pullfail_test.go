package localseg_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// TestFailedPullCreatesNoConsumer: a first pull whose read fails (the
// read index's build, or the records' read) answers the error and leaves
// no consumer behind, neither in the open store nor after a reopen; the
// next pull that succeeds is the one that creates it.
func TestFailedPullCreatesNoConsumer(t *testing.T) {
	mem := newMachine(t)
	var failReads atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if failReads.Load() && op.Kind == faultfs.OpRead && strings.HasSuffix(op.Path, localseg.SegmentFileName(1)) {
			return faultfs.EIO
		}
		return nil
	})
	opts := localseg.Options{FS: faultfs.Wrap(mem, inj)}
	s, err := localseg.Open(crashDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Append(localseg.Event{ExecutionID: "e", TransactionID: "t" + string(rune('a'+i)), Payload: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	noConsumer := func(s *localseg.Store, when string) {
		t.Helper()
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := snap.Consumers["c"]; ok {
			t.Fatalf("%s: the failed pull left consumer c behind: %v", when, snap.Consumers)
		}
	}

	failReads.Store(true)
	if _, err := s.Pull("c", 10); err == nil {
		t.Fatal("a pull whose segment read fails succeeded")
	}
	failReads.Store(false)
	noConsumer(s, "open store")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = localseg.Open(crashDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	noConsumer(s, "after a reopen")
	// Once more with the read index built, so the read that fails is the
	// pull's own read of the records.
	if _, err := s.Scan(0, 1); err != nil {
		t.Fatal(err)
	}
	failReads.Store(true)
	if _, err := s.Pull("c", 10); err == nil {
		t.Fatal("a pull whose segment read fails succeeded (index built)")
	}
	failReads.Store(false)
	noConsumer(s, "index built")
	res, err := s.Pull("c", 10)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || len(res.Records) != 3 || res.Acked != 0 {
		t.Fatalf("the first pull that succeeds: created %v, %d records, acked %d; want created, 3 records, acked 0", res.Created, len(res.Records), res.Acked)
	}
}

// TestFirstPullsRacingCreateOneConsumer: a first pull that reads while
// another first pull of the same consumer creates it (and the consumer is
// acked) does not create it again over that cursor: it serves the
// consumer from its cursor.
func TestFirstPullsRacingCreateOneConsumer(t *testing.T) {
	mem := newMachine(t)
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRead && strings.HasSuffix(op.Path, localseg.SegmentFileName(1)) && armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	})
	s, err := localseg.Open(crashDir, localseg.Options{FS: faultfs.Wrap(mem, inj)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		if _, err := s.Append(localseg.Event{ExecutionID: "e", TransactionID: "t" + string(rune('a'+i)), Payload: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	// The read index is built first (its scan reads the segment too): the
	// read held is the first pull's own.
	if _, err := s.Scan(0, 1); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	type answer struct {
		res localseg.PullResult
		err error
	}
	first := make(chan answer, 1)
	go func() {
		res, err := s.Pull("c", 10)
		first <- answer{res, err}
	}()
	<-entered // the first pull is in its read, before it creates
	res, err := s.Pull("c", 10)
	if err != nil || !res.Created {
		t.Fatalf("the second pull: %+v, %v; want it to create c", res, err)
	}
	if _, err := s.Ack("c", 2); err != nil {
		t.Fatal(err)
	}
	close(release)
	a := <-first
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.res.Created || a.res.Acked != 2 || len(a.res.Records) != 1 || a.res.Records[0].Seq != 3 {
		t.Fatalf("the first pull, after c was created and acked to 2 during its read: created %v, acked %d, %d records; want c served from 2 (record 3)", a.res.Created, a.res.Acked, len(a.res.Records))
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Consumers["c"] != 2 {
		t.Fatalf("consumer c is at %d after the racing pulls, want 2 (acked)", snap.Consumers["c"])
	}
}
