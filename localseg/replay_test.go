package localseg_test

// Replay of sealed segments and the index build (docs/FORMAT.md §4.3, §4.4): both
// scan segments in parallel and stitch them in log order, so these tests
// build logs by hand — several sealed segments, with a sequence gap or
// duplicate inside one or across two, or damage in two places — and check
// that a full open and the first read after a trusted open report exactly
// what a serial walk would: the first invalid frame in log order, naming
// its segment and offset.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// handSegment is one segment of a hand-built log: the event sequences it
// holds, in order (a consumer frame is written where seq is 0).
type handSegment []uint64

// buildLog writes segs as sealed segments 1..n and an empty active segment
// n+1 into a new directory, with payload bytes of filler each, and returns
// the directory and the byte offset of every frame in every segment.
func buildLog(t *testing.T, segs []handSegment, filler int) (string, [][]int64) {
	t.Helper()
	dir := t.TempDir()
	offs := make([][]int64, len(segs))
	for i, seq := range segs {
		var img []byte
		for _, q := range seq {
			offs[i] = append(offs[i], int64(len(img)))
			f := localseg.Frame{Kind: localseg.KindConsumerCreate, Consumer: "c"}
			if q > 0 {
				f = localseg.Frame{Kind: localseg.KindEvent, Seq: q, ExecutionID: fmt.Sprint("e", q%3), TransactionID: fmt.Sprint("t", q), Payload: strings.Repeat("p", filler)}
			}
			var err error
			if img, err = localseg.EncodeFrame(img, &f); err != nil {
				t.Fatal(err)
			}
		}
		if err := localseg.WriteSegmentFile(localseg.OSFS{}, dir, uint64(i+1), img); err != nil {
			t.Fatal(err)
		}
	}
	if err := localseg.WriteSegmentFile(localseg.OSFS{}, dir, uint64(len(segs)+1), nil); err != nil {
		t.Fatal(err)
	}
	return dir, offs
}

// seqRun returns the sequences from..to.
func seqRun(from, to uint64) handSegment {
	var s handSegment
	for q := from; q <= to; q++ {
		s = append(s, q)
	}
	return s
}

// wantCorruptAt checks err is a *CorruptionError of segment seg at offset
// off, and (when gap is set) a sequence gap.
func wantCorruptAt(t *testing.T, what string, err error, seg uint64, off int64, gap bool) {
	t.Helper()
	var ce *localseg.CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, localseg.ErrCorrupt) || ce.Segment != seg || ce.Offset != off {
		t.Fatalf("%s: %v, want corruption of segment %d at offset %d", what, err, seg, off)
	}
	if gap && !strings.Contains(err.Error(), "gap in global_sequence") {
		t.Fatalf("%s: %v, want a sequence gap", what, err)
	}
}

// checkBothPaths opens dir without a checkpoint (full replay at open) and
// with a forged trusted checkpoint (the replay runs at the first read) and
// expects the same corruption from both.
func checkBothPaths(t *testing.T, dir string, active uint64, seg uint64, off int64, gap bool) {
	t.Helper()
	o := localseg.Options{ReadOnly: true}
	_, err := localseg.Open(dir, o)
	wantCorruptAt(t, "open without a checkpoint", err, seg, off, gap)

	ck := localseg.EncodeCheckpointForTest(1, active, 0, nil)
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.json"), ck, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := localseg.Open(dir, o)
	if err != nil {
		t.Fatalf("open with a trusted checkpoint: %v", err)
	}
	defer closeT(t, s)
	_, err = s.Scan(0, 1)
	wantCorruptAt(t, "first read", err, seg, off, gap)
	_, err = s.ReadExecution("e1", 0, 1)
	wantCorruptAt(t, "second read", err, seg, off, gap)
}

func TestReplaySequenceGaps(t *testing.T) {
	// Eight sealed segments, so several are scanned at once.
	base := func() []handSegment {
		var segs []handSegment
		for i := range 8 {
			segs = append(segs, seqRun(uint64(i*10+1), uint64(i*10+10)))
		}
		return segs
	}
	t.Run("valid", func(t *testing.T) {
		segs := base()
		segs[3] = append(handSegment{0}, segs[3]...) // a consumer frame first
		dir, _ := buildLog(t, segs, 40)
		s := openT(t, dir, localseg.Options{ReadOnly: true})
		defer closeT(t, s)
		recs := scanAll(t, s)
		if len(recs) != 80 || recs[79].Seq != 80 {
			t.Fatalf("%d records", len(recs))
		}
		if p, err := s.ReadExecution("e1", 0, 100); err != nil || p.RecordCount != 27 {
			t.Fatalf("execution e1: %d records, %v", p.RecordCount, err)
		}
	})
	t.Run("gap across segments", func(t *testing.T) {
		segs := base()
		segs[5] = seqRun(52, 61) // segment 6 starts at 52, not 51
		segs[6], segs[7] = seqRun(62, 71), seqRun(72, 81)
		dir, _ := buildLog(t, segs, 40)
		checkBothPaths(t, dir, 9, 6, 0, true)
	})
	t.Run("duplicate across segments", func(t *testing.T) {
		segs := base()
		segs[4] = seqRun(40, 49) // event 40 again
		dir, _ := buildLog(t, segs, 40)
		checkBothPaths(t, dir, 9, 5, 0, true)
	})
	t.Run("gap across segments after consumer frames", func(t *testing.T) {
		segs := base()
		segs[2] = append(handSegment{0, 0}, seqRun(22, 30)...)
		dir, offs := buildLog(t, segs, 40)
		checkBothPaths(t, dir, 9, 3, offs[2][2], true)
	})
	t.Run("gap inside a segment", func(t *testing.T) {
		segs := base()
		segs[6] = append(seqRun(61, 64), seqRun(66, 71)...)
		dir, offs := buildLog(t, segs, 40)
		checkBothPaths(t, dir, 9, 7, offs[6][4], true)
	})
	t.Run("the first error in log order wins", func(t *testing.T) {
		// A gap in segment 7 and, earlier in the log, a gap inside
		// segment 2 and a bad CRC in segment 4: segment 2's is reported,
		// whichever scan finishes first.
		segs := base()
		segs[1] = append(seqRun(11, 13), seqRun(15, 21)...)
		segs[6] = seqRun(70, 79)
		dir, offs := buildLog(t, segs, 40)
		p := filepath.Join(dir, localseg.SegmentFileName(4))
		b, _ := os.ReadFile(p)
		b[offs[3][2]+8] ^= 0xff
		os.WriteFile(p, b, 0o644)
		checkBothPaths(t, dir, 9, 2, offs[1][3], true)
		// Without segment 2's gap, segment 4's CRC is first.
		segs = base()
		segs[6] = seqRun(70, 79)
		dir, offs = buildLog(t, segs, 40)
		p = filepath.Join(dir, localseg.SegmentFileName(4))
		b, _ = os.ReadFile(p)
		b[offs[3][2]+8] ^= 0xff
		os.WriteFile(p, b, 0o644)
		checkBothPaths(t, dir, 9, 4, offs[3][2], false)
	})
	t.Run("damage before the first event of a gapped segment", func(t *testing.T) {
		// Segment 5 opens with a consumer frame whose CRC is wrong and
		// then events that do not continue the tip: the damaged frame
		// comes first.
		segs := base()
		segs[4] = append(handSegment{0}, seqRun(45, 54)...)
		dir, offs := buildLog(t, segs, 40)
		p := filepath.Join(dir, localseg.SegmentFileName(5))
		b, _ := os.ReadFile(p)
		b[offs[4][0]+8] ^= 0xff
		os.WriteFile(p, b, 0o644)
		checkBothPaths(t, dir, 9, 5, 0, false)
	})
}

// TestReplayFramesAcrossReadChunks: replay reads segments in chunks of a
// few hundred KiB; frames straddling a chunk boundary, and frames larger
// than a chunk, replay and read back intact, and a frame cut by the end of
// a sealed segment is corruption at its start.
func TestReplayFramesAcrossReadChunks(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: localseg.MaxSegmentBytes}
	s := openT(t, dir, o)
	var evs []localseg.Event
	for i, size := range []int{100, 300 << 10, 7, 1 << 20, 255 << 10, 3, 2<<20 + 5, 1} {
		for k := range 3 {
			ev := localseg.Event{ExecutionID: fmt.Sprint("x", k), TransactionID: fmt.Sprint("t", i, k), Payload: strings.Repeat(string(rune('a'+i)), size)}
			mustAppend(t, s, ev)
			evs = append(evs, ev)
		}
	}
	if _, err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	for _, mode := range []string{"checkpoint", "replay"} {
		if mode == "replay" {
			os.Remove(filepath.Join(dir, "checkpoint.json"))
		}
		s := openT(t, dir, o)
		wantRecords(t, scanAll(t, s), evs, 1)
		closeT(t, s)
	}
	// Cut the sealed segment inside its last frame.
	seg := filepath.Join(dir, localseg.SegmentFileName(1))
	b, _ := os.ReadFile(seg)
	starts := frameBounds(t, seg, int64(len(b)))
	os.WriteFile(seg, b[:len(b)-1], 0o644)
	os.Remove(filepath.Join(dir, "checkpoint.json"))
	_, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	wantCorruptAt(t, "cut sealed segment", err, 1, starts[len(starts)-2], false)
}
