package localseg_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// A pull that would create one consumer more than the limit is refused
// and writes nothing; existing consumers are served; a deletion makes room.
func TestConsumerLimit(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{MaxConsumers: 3}
	s := openT(t, dir, o)
	mustBeNew(t, s, txnEvent(1))
	for _, c := range []string{"c1", "c2", "c3"} {
		if r, err := s.Pull(c, 1); err != nil || !r.Created {
			t.Fatalf("pull %s: %+v %v", c, r, err)
		}
	}
	before := dirBytes(t, dir)
	_, err := s.Pull("c4", 1)
	if !errors.Is(err, localseg.ErrConsumerLimit) || !errors.Is(err, localseg.ErrInvalidState) || !strings.Contains(err.Error(), "3 consumers") {
		t.Fatalf("pull beyond the limit: %v", err)
	}
	if after := dirBytes(t, dir); !sameFiles(before, after) {
		t.Fatal("the refused pull changed the store")
	}
	if r, err := s.Pull("c2", 1); err != nil || r.Created {
		t.Fatalf("an existing consumer is served: %+v %v", r, err)
	}
	if err := s.DeleteConsumer("c1"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Pull("c4", 1); err != nil || !r.Created {
		t.Fatalf("after a deletion: %+v %v", r, err)
	}
	closeT(t, s)
	// The limit holds across a reopen (the count comes from the frames).
	s = openT(t, dir, o)
	defer closeT(t, s)
	if _, err := s.Pull("c5", 1); !errors.Is(err, localseg.ErrConsumerLimit) {
		t.Fatalf("after reopen: %v", err)
	}
	for _, n := range []int{-1, localseg.MaxConsumersCeiling + 1} {
		if _, err := localseg.Open(t.TempDir(), localseg.Options{MaxConsumers: n}); !errors.Is(err, localseg.ErrInvalidInput) {
			t.Fatalf("max consumers %d: %v", n, err)
		}
	}
}

// RED control: without a limit of 3 (the default, 10,000), the same pulls
// create every consumer.
func TestConsumerLimitRED(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{})
	defer closeT(t, s)
	mustBeNew(t, s, txnEvent(1))
	for _, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		if _, err := s.Pull(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	if snap, _ := s.Snapshot(); len(snap.Consumers) != 5 {
		t.Fatalf("%d consumers", len(snap.Consumers))
	}
}
