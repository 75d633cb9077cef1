package localseg_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// With Options.DeferCleanup a writable open leaves a segment file below
// reclaim.json (a reclaim cut off before its unlink) and an unfinished
// temporary file where they are, until RemoveLeftovers deletes them (once,
// and reports them); without it the open deletes them itself.
func TestDeferCleanupKeepsLeftoversUntilAsked(t *testing.T) {
	dir := sweepTempDir(t)
	opts := localseg.Options{SegmentMaxBytes: 16 << 10}
	s := openT(t, dir, opts)
	mustAppend(t, s, evt("a", 1))
	if _, err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, evt("a", 2))
	seg1 := filepath.Join(dir, localseg.SegmentFileName(1))
	data, err := os.ReadFile(seg1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reclaim(1); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	tmp := filepath.Join(dir, "reclaim.json.tmp")
	plant := func() {
		t.Helper()
		if err := os.WriteFile(seg1, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tmp, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	present := func(p string) bool { _, err := os.Stat(p); return err == nil }

	plant()
	deferred := opts
	deferred.DeferCleanup = true
	s = openT(t, dir, deferred)
	if !present(seg1) || !present(tmp) {
		t.Fatalf("a deferred open removed its leftovers (segment 1: %v, temp: %v)", present(seg1), present(tmp))
	}
	if err := s.RemoveLeftovers(); err != nil {
		t.Fatal(err)
	}
	if present(seg1) || present(tmp) {
		t.Fatalf("RemoveLeftovers kept them (segment 1: %v, temp: %v)", present(seg1), present(tmp))
	}
	if got := s.OpenReport().LeftoversRemoved; !slices.Equal(got, []uint64{1}) {
		t.Fatalf("reported removed %v, want [1]", got)
	}
	plant() // a second call does not look again
	if err := s.RemoveLeftovers(); err != nil || !present(seg1) {
		t.Fatalf("second RemoveLeftovers: %v, segment 1 present %v", err, present(seg1))
	}
	closeT(t, s)

	s = openT(t, dir, opts)
	defer closeT(t, s)
	if present(seg1) || present(tmp) {
		t.Fatalf("an open without DeferCleanup kept its leftovers (segment 1: %v, temp: %v)", present(seg1), present(tmp))
	}
}

// A spare segment left by a crash shares its temporary name with the
// spare the store prepares once its active segment is half full: if that
// happens before RemoveLeftovers, the live spare is kept and the rollover
// renames it into place.
func TestDeferCleanupKeepsALiveSpare(t *testing.T) {
	dir := sweepTempDir(t)
	opts := localseg.Options{SegmentMaxBytes: 4096, DeferCleanup: true}
	s := openT(t, dir, opts)
	closeT(t, s)
	spare := filepath.Join(dir, "seg-spare.eslog.tmp")
	if err := os.WriteFile(spare, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, opts)
	defer closeT(t, s)
	for i := 0; ; i++ {
		mustAppend(t, s, evt("a", i))
		if snap, err := s.Snapshot(); err != nil {
			t.Fatal(err)
		} else if snap.Segments[len(snap.Segments)-1].Size*2 >= 4096 {
			break
		}
	}
	mustAppend(t, s, evt("b", 0)) // its leader prepares the spare
	if err := s.RemoveLeftovers(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		mustAppend(t, s, evt("c", i))
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Segments) > 1 {
			break
		}
	}
	if present, err := os.Stat(spare); err == nil {
		t.Fatalf("the spare is still under its temporary name after the rollover: %v", present.Size())
	}
}
