package localseg_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// TestFailedPullCreatesNoConsumer: a first pull whose read fails answers
// the error and leaves no consumer behind, neither in the open store nor
// after a reopen; the next pull that succeeds is the one that creates it.
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
	res, err := s.Pull("c", 10)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || len(res.Records) != 3 || res.Acked != 0 {
		t.Fatalf("the first pull that succeeds: created %v, %d records, acked %d; want created, 3 records, acked 0", res.Created, len(res.Records), res.Acked)
	}
}
