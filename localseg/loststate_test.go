package localseg_test

// A lost local segment is an error, not a shorter log (issue 12, finding
// 9): evidence that the store held more durable state than its files do
// (a trusted checkpoint naming a higher segment or more events, the index
// file of a segment whose successor is missing, reclaim.json above every
// file) stops the open, writable or read-only, and the refused open
// changes nothing.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// lostStateStore writes 30 events over several segments (1 KiB events in
// 4 KiB segments), acks a consumer, and returns the directory.
func lostStateStore(t *testing.T, o localseg.Options) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shard-0000")
	o.SegmentMaxBytes = 4096
	s := openT(t, dir, o)
	for i := range 30 {
		ev := evt("e", i)
		ev.Payload = strings.Repeat("x", 1000)
		mustAppend(t, s, ev)
	}
	if _, err := s.Pull("c", 30); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack("c", 30); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	return dir
}

func segIDs(t *testing.T, dir string) []uint64 {
	t.Helper()
	var ids []uint64
	for id := uint64(1); ; id++ {
		if _, err := os.Stat(filepath.Join(dir, localseg.SegmentFileName(id))); err != nil {
			if len(ids) == 0 && id < 100 {
				continue
			}
			return ids
		}
		ids = append(ids, id)
	}
}

func rm(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLostSegmentIsAnError(t *testing.T) {
	cases := []struct {
		name    string
		opts    localseg.Options
		damage  func(t *testing.T, dir string)
		mention string // the error names what is missing
	}{
		{"highest segment deleted (checkpoint names it)", localseg.Options{}, func(t *testing.T, dir string) {
			ids := segIDs(t, dir)
			rm(t, dir, localseg.SegmentFileName(ids[len(ids)-1]))
		}, "checkpoint"},
		{"highest segment and checkpoint deleted (index file of its predecessor)", localseg.Options{}, func(t *testing.T, dir string) {
			ids := segIDs(t, dir)
			rm(t, dir, localseg.SegmentFileName(ids[len(ids)-1]), "checkpoint.json")
		}, "index file"},
		{"active segment cut short (checkpoint counts more events)", localseg.Options{NoPreallocate: true}, func(t *testing.T, dir string) {
			ids := segIDs(t, dir)
			p := filepath.Join(dir, localseg.SegmentFileName(ids[len(ids)-1]))
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}, "events"},
		{"every retained segment deleted during a reclaim (reclaim.json above the files)", localseg.Options{}, func(t *testing.T, dir string) {
			// A crash interrupted the reclaim's unlinks (segment 1 is a
			// leftover), and everything above it was lost.
			seg1, err := os.ReadFile(filepath.Join(dir, localseg.SegmentFileName(1)))
			if err != nil {
				t.Fatal(err)
			}
			s := openT(t, dir, localseg.Options{SegmentMaxBytes: 4096})
			if _, err := s.Reclaim(2); err != nil {
				t.Fatal(err)
			}
			closeT(t, s)
			names, _ := os.ReadDir(dir)
			for _, e := range names {
				if n := e.Name(); strings.HasPrefix(n, "seg-") || n == "checkpoint.json" {
					rm(t, dir, n)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, localseg.SegmentFileName(1)), seg1, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "reclaim.json"},
		{"highest segment of consumer frames only deleted (checkpoint names it)", localseg.Options{}, func(t *testing.T, dir string) {
			s := openT(t, dir, localseg.Options{SegmentMaxBytes: 4096})
			if _, err := s.Seal(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Pull("d", 1); err != nil {
				t.Fatal(err)
			}
			closeT(t, s)
			ids := segIDs(t, dir)
			rm(t, dir, localseg.SegmentFileName(ids[len(ids)-1]), localseg.SegmentIndexFileName(ids[len(ids)-2]))
		}, "checkpoint.json names segment"},
		{"every segment deleted and the checkpoint torn (no segment file at all)", localseg.Options{}, func(t *testing.T, dir string) {
			// Found by the simulation (seed 70): a torn rewrite left
			// zeros after the checkpoint's JSON, then the only segment
			// file was lost. The file's presence still shows a store.
			names, _ := os.ReadDir(dir)
			for _, e := range names {
				if strings.HasPrefix(e.Name(), "seg-") {
					rm(t, dir, e.Name())
				}
			}
			p := filepath.Join(dir, "checkpoint.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, append(b, 0, 0, 0, 0), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "checkpoint.json exists"},
		{"a middle segment deleted", localseg.Options{}, func(t *testing.T, dir string) {
			ids := segIDs(t, dir)
			rm(t, dir, localseg.SegmentFileName(ids[len(ids)/2]))
		}, "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := lostStateStore(t, tc.opts)
			tc.damage(t, dir)
			before := snapshotDir(t, dir)
			for _, ro := range []bool{false, true} {
				o := tc.opts
				o.SegmentMaxBytes, o.ReadOnly = 4096, ro
				s, err := localseg.Open(dir, o)
				if err == nil {
					tip := s.Tip()
					s.Close()
					t.Fatalf("read-only=%v: Open presented a shorter log as complete (tip %d of 30)", ro, tip)
				}
				if !errors.Is(err, localseg.ErrCorrupt) && !errors.Is(err, localseg.ErrInvalidState) {
					t.Fatalf("read-only=%v: %v, want a corruption or invalid-state error", ro, err)
				}
				if !strings.Contains(err.Error(), tc.mention) {
					t.Errorf("read-only=%v: %v does not name the %s", ro, err, tc.mention)
				}
				if after := snapshotDir(t, dir); !equalDirs(before, after) {
					t.Fatalf("read-only=%v: the refused Open changed the directory", ro)
				}
			}
		})
	}
}

// TestLegitimateStatesStillOpen: what a crash, GC or a fresh start leaves is
// not evidence of loss.
func TestLegitimateStatesStillOpen(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		tip    uint64
	}{
		{"as closed", func(t *testing.T, dir string) {}, 30},
		{"checkpoint missing", func(t *testing.T, dir string) { rm(t, dir, "checkpoint.json") }, 30},
		{"checkpoint torn", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "checkpoint.json")
			b, _ := os.ReadFile(p)
			b[5] ^= 0x20
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, 30},
		{"index files missing", func(t *testing.T, dir string) {
			names, _ := os.ReadDir(dir)
			for _, e := range names {
				if strings.HasSuffix(e.Name(), ".idx") {
					rm(t, dir, e.Name())
				}
			}
		}, 30},
		{"a new empty segment the checkpoint does not name yet", func(t *testing.T, dir string) {
			// A crash in a rollover: the predecessor was truncated to its
			// end and fsynced, then its successor created.
			s := openT(t, dir, localseg.Options{SegmentMaxBytes: 4096, ReadOnly: true})
			snap, err := s.Snapshot()
			s.Close()
			if err != nil {
				t.Fatal(err)
			}
			last := snap.Segments[len(snap.Segments)-1]
			if err := os.Truncate(filepath.Join(dir, localseg.SegmentFileName(last.ID)), last.Size); err != nil {
				t.Fatal(err)
			}
			ids := segIDs(t, dir)
			if err := os.WriteFile(filepath.Join(dir, localseg.SegmentFileName(ids[len(ids)-1]+1)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := lostStateStore(t, localseg.Options{})
			tc.damage(t, dir)
			for _, ro := range []bool{true, false} {
				s, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 4096, ReadOnly: ro})
				if err != nil {
					t.Fatalf("read-only=%v: %v", ro, err)
				}
				if s.Tip() != tc.tip {
					t.Errorf("read-only=%v: tip %d, want %d", ro, s.Tip(), tc.tip)
				}
				s.Close()
			}
		})
	}
	// A fresh store, writable and read-only.
	dir := filepath.Join(t.TempDir(), "shard-0000")
	s, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	closeT(t, openT(t, dir, localseg.Options{}))
}

func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func equalDirs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
