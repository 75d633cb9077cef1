package localseg_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// jumpTarget is a takeover's start_segment in the tests: fence 4 + 2^20.
const jumpTarget = 4 + 1<<20

// jumpedStore: segments 1..3 (3 the active one, holding events), a jump
// of the active segment to jumpTarget, then two more seals: ids 1, 2,
// jumpTarget, jumpTarget+1, jumpTarget+2 (active).
func jumpedStore(t *testing.T) (string, []localseg.Event) {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, dir, small)
	var evs []localseg.Event
	for range 2 {
		evs = append(evs, appendMany(t, s, 3, 2)...)
		if _, err := s.Seal(); err != nil {
			t.Fatal(err)
		}
	}
	evs = append(evs, appendMany(t, s, 2, 2)...) // the active segment's frames move with it
	if err := s.JumpTo(jumpTarget); err != nil {
		t.Fatal(err)
	}
	if err := s.JumpTo(jumpTarget); err != nil { // again: a no-op
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, appendMany(t, s, 3, 2)...)
	}
	wantRecords(t, scanAll(t, s), evs, 1)
	closeT(t, s)
	return dir, evs
}

func snapIDs(t *testing.T, s *localseg.Store) []uint64 {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, seg := range snap.Segments {
		ids = append(ids, seg.ID)
	}
	return ids
}

// TestJumpToAcrossRestart: the active segment jumps to a takeover's start
// segment with its frames; the store reopens across the gap on the
// checkpoint path and on the full replay, read-only too, and reclaims
// below, up to and above the gap.
func TestJumpToAcrossRestart(t *testing.T) {
	dir, evs := jumpedStore(t)
	want := []uint64{1, 2, jumpTarget, jumpTarget + 1, jumpTarget + 2}
	for _, replay := range []bool{false, true} {
		if replay {
			if err := os.Remove(filepath.Join(dir, "checkpoint.json")); err != nil {
				t.Fatal(err)
			}
		}
		for _, ro := range []bool{true, false} {
			s := openT(t, dir, localseg.Options{SegmentMaxBytes: 1024, ReadOnly: ro})
			if got := snapIDs(t, s); !slices.Equal(got, want) {
				t.Fatalf("replay=%v read-only=%v: segments %v, want %v", replay, ro, got, want)
			}
			wantRecords(t, scanAll(t, s), evs, 1)
			closeT(t, s)
		}
	}
	s := openT(t, dir, small)
	if err := s.JumpTo(jumpTarget + 1); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("a jump below the active segment: %v", err)
	}
	if _, err := s.Reclaim(3); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("reclaim through an id the jump skipped: %v", err)
	}
	for _, through := range []uint64{1, 2, jumpTarget} {
		if _, err := s.Reclaim(through); err != nil {
			t.Fatalf("reclaim through %d: %v", through, err)
		}
		closeT(t, s)
		s = openT(t, dir, small)
		if got := snapIDs(t, s); got[0] <= through || !slices.Contains(want, got[0]) {
			t.Fatalf("after reclaim through %d: segments %v", through, got)
		}
	}
	mustAppend(t, s, evt("x", 1))
	closeT(t, s)
}

// TestJumpLostSegmentStopsOpen: a segment file lost below or above the
// jump, or the jump's record lost, still refuses the open (writable and
// read-only) before anything changes: the gap is legal only where
// jumps.json records it (issue 12's lost-segment evidence).
func TestJumpLostSegmentStopsOpen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		remove  string
		missing uint64
	}{
		{"below", localseg.SegmentFileName(2), 2},
		{"first above", localseg.SegmentFileName(jumpTarget), jumpTarget},
		{"second above", localseg.SegmentFileName(jumpTarget + 1), jumpTarget + 1},
		{"the record", "jumps.json", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := jumpedStore(t)
			if err := os.Remove(filepath.Join(dir, tc.remove)); err != nil {
				t.Fatal(err)
			}
			before := dirBytes(t, dir)
			for _, ro := range []bool{true, false} {
				_, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 1024, ReadOnly: ro})
				var ce *localseg.CorruptionError
				if !errors.As(err, &ce) || ce.Segment != tc.missing {
					t.Fatalf("read-only=%v: %v, want segment %d missing", ro, err, tc.missing)
				}
			}
			if !sameFiles(before, dirBytes(t, dir)) {
				t.Fatal("a refused open changed the directory")
			}
		})
	}
}

// TestJumpRecordWithoutRename: a crash between the durable record and the
// rename leaves the active segment under its old id: a read-only open
// reads it there, a writable one finishes the jump (same bytes, new id).
// A segment file inside a recorded jump anywhere else is a lost segment.
func TestJumpRecordWithoutRename(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, small)
	evs := appendMany(t, s, 3, 2)
	if _, err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, appendMany(t, s, 2, 2)...)
	closeT(t, s)
	if err := localseg.RecordJump(localseg.OSFS{}, dir, 2, jumpTarget); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	copyDir(t, dir, bad)
	s = openT(t, dir, localseg.Options{SegmentMaxBytes: 1024, ReadOnly: true})
	if got := snapIDs(t, s); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("read-only: segments %v", got)
	}
	wantRecords(t, scanAll(t, s), evs, 1)
	closeT(t, s)
	s = openT(t, dir, small)
	if got := snapIDs(t, s); !slices.Equal(got, []uint64{1, jumpTarget}) {
		t.Fatalf("writable: segments %v", got)
	}
	evs = append(evs, appendMany(t, s, 2, 2)...)
	wantRecords(t, scanAll(t, s), evs, 1)
	closeT(t, s)

	// A sealed segment inside the jump: not a pending jump, a lost one.
	if err := localseg.WriteSegmentFile(localseg.OSFS{}, bad, 3, nil); err != nil {
		t.Fatal(err)
	}
	var ce *localseg.CorruptionError
	if _, err := localseg.Open(bad, small); !errors.As(err, &ce) {
		t.Fatalf("a segment beside a pending jump: %v", err)
	}
}
