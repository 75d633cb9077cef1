package localseg_test

import (
	"maps"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// Snapshot.Deleted feeds the cursor object's tombstones (docs/FORMAT.md
// §6.6): each deleted consumer with the last event before its
// ConsumerDelete frame; a consumer created again leaves it.
func TestSnapshotReportsRecentDeletes(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{})
	for i := range 3 {
		if _, err := s.Append(evt("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b"} {
		if _, err := s.Pull(name, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteConsumer("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(evt("x", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumer("b"); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]uint64{"a": 3, "b": 4}; !maps.Equal(snap.Deleted, want) {
		t.Fatalf("Deleted %v, want %v", snap.Deleted, want)
	}
	if _, err := s.Pull("a", 1); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Snapshot()
	if want := map[string]uint64{"b": 4}; !maps.Equal(snap.Deleted, want) {
		t.Fatalf("after a is created again: Deleted %v, want %v", snap.Deleted, want)
	}
}
