package localseg_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// A batch written after the last fsync (frames 2 and 3 in one write, never
// acknowledged) whose first sector was lost in the crash while the later
// sectors landed: frame 2 starts 2 bytes before a sector boundary, so it
// lost the first two bytes of its magic, and frame 3 behind it is whole.
// The checkpoint trusts the file through frame 1. The crash model (each
// sector of an interrupted write is written or as before) makes this a
// torn tail, not corruption: nothing after a frame no fsync covered was
// acknowledged. Recovery must drop frames 2 and 3 and open (the
// simulation's seed 1121, which could never open again).
func TestTornTailLostFirstSectorOfBatch(t *testing.T) {
	dir, evs, opts := lostHeadFixture(t, 510, nil)
	s, err := localseg.Open(dir, opts)
	if err != nil {
		t.Fatalf("open after a lost first sector of an unacknowledged batch: %v", err)
	}
	defer closeT(t, s)
	if s.Tip() != 1 || s.OpenReport().TornTailBytes == 0 {
		t.Fatalf("tip %d, report %+v: want tip 1 and a torn tail dropped", s.Tip(), s.OpenReport())
	}
	wantRecords(t, scanAll(t, s), evs[:1], 1)
	if seq := mustAppend(t, s, evt("next", 1)); seq != 2 {
		t.Fatalf("next append got %d, want 2", seq)
	}
}

// RED controls: the same bytes are corruption when the frame with the lost
// head does not check out once its magic is put back (a flipped byte in
// its body), or when its zeroed bytes do not end at a sector boundary.
func TestTornTailLostSectorHeadControls(t *testing.T) {
	for _, c := range []struct {
		name  string
		start int
		flip  int // offset of a byte flipped in the torn frame (0: none)
	}{
		{"body_damaged", 510, 600},
		{"not_at_a_sector_boundary", 500, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _, opts := lostHeadFixture(t, c.start, func(b []byte) {
				if c.flip > 0 {
					b[c.flip] ^= 0x10
				}
			})
			s, err := localseg.Open(dir, opts)
			if err == nil {
				closeT(t, s)
				t.Fatalf("opened (tip %d, report %+v): want corruption", s.Tip(), s.OpenReport())
			}
			if !errors.Is(err, localseg.ErrCorrupt) {
				t.Fatalf("open: %v, want ErrCorrupt", err)
			}
		})
	}
}

// lostHeadFixture builds a store whose segment 1 holds frame 1 (durable,
// with its checkpoint) ending at start, then frames 2 and 3 as one
// unsynced write whose first two bytes were lost (zero) while the rest
// landed (at start 510 they are the end of sector 0); damage, if set, changes the
// image of the segment file first.
func lostHeadFixture(t *testing.T, start int, damage func([]byte)) (string, []localseg.Event, localseg.Options) {
	opts := localseg.Options{SegmentMaxBytes: 16 << 10}
	probe := sweepTempDir(t)
	s := openT(t, probe, opts)
	mustAppend(t, s, localseg.Event{ExecutionID: "e", TransactionID: "t1", Payload: ""})
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	pad := start - int(snap.Segments[0].Size)
	evs := []localseg.Event{
		{ExecutionID: "e", TransactionID: "t1", Payload: strings.Repeat("x", pad)},
		{ExecutionID: "e", TransactionID: "t2", Payload: strings.Repeat("y", 300)},
		{ExecutionID: "e", TransactionID: "t3", Payload: strings.Repeat("z", 300)},
	}

	full, dir := sweepTempDir(t), sweepTempDir(t)
	s = openT(t, full, opts)
	mustAppend(t, s, evs[0])
	closeT(t, s)
	copyDir(t, full, dir) // the disk as of the last fsync: frame 1, its checkpoint
	s = openT(t, full, opts)
	mustAppend(t, s, evs[1])
	mustAppend(t, s, evs[2])
	closeT(t, s)
	name := localseg.SegmentFileName(1)
	written, err := os.ReadFile(filepath.Join(full, name))
	if err != nil {
		t.Fatal(err)
	}
	if written[start] != 0x01 {
		t.Fatalf("fixture: no frame at %d", start)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if damage != nil {
		damage(written)
	}
	// What follows the two lost bytes landed; they kept their old bytes
	// (zeros after frame 1).
	boundary := start + 2 // two bytes lost: a sector boundary when start is 510
	tail := written[boundary:]
	i := len(tail) - 1
	for i >= 0 && tail[i] == 0 {
		i--
	}
	if _, err := f.WriteAt(tail[:i+1], int64(boundary)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return dir, evs, opts
}
