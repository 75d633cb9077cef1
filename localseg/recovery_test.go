package localseg_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// frameBounds returns the start offsets of the frames of a segment file's
// first size bytes, and size.
func frameBounds(t testing.TB, path string, size int64) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	for o := int64(0); o < size; {
		_, n, err := localseg.DecodeFrame(b[o:size])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, o, err)
		}
		starts = append(starts, o)
		o += int64(n)
	}
	return append(starts, size)
}

// tornFixture is a store whose highest segment ends with frames 7 and 8,
// with a copy of the checkpoint as it was after frame 6.
type tornFixture struct {
	dir       string
	evs       []localseg.Event
	active    string  // file name of the highest segment
	bounds    []int64 // frame starts in it, and its logical end
	first     int     // index (into evs) of its first event
	ckBefore  []byte  // checkpoint.json after the first len(evs)-2 events
	opts      localseg.Options
	ckSegment uint64
}

func newTornFixture(t *testing.T, payload int) *tornFixture {
	t.Helper()
	fx := &tornFixture{dir: sweepTempDir(t), opts: localseg.Options{SegmentMaxBytes: 16 << 10}}
	s := openT(t, fx.dir, fx.opts)
	for i := range 8 {
		ev := localseg.Event{ExecutionID: fmt.Sprintf("e%d", i%2), TransactionID: fmt.Sprint("t", i), Payload: fmt.Sprintf("%d:%s", i, strings.Repeat("é<x>", payload/5))}
		mustAppend(t, s, ev)
		fx.evs = append(fx.evs, ev)
		if i == 5 {
			fx.ckBefore, _ = os.ReadFile(filepath.Join(fx.dir, "checkpoint.json"))
		}
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	last := snap.Segments[len(snap.Segments)-1]
	fx.active = localseg.SegmentFileName(last.ID)
	fx.first = int(last.FirstSeq - 1)
	fx.bounds = frameBounds(t, filepath.Join(fx.dir, fx.active), last.Size)
	if len(fx.bounds) < 3 {
		t.Fatalf("fixture: %d frames in the highest segment", len(fx.bounds)-1)
	}
	return fx
}

// damage copies the fixture to a new directory, applies f to its highest
// segment file, and installs the checkpoint variant.
func (fx *tornFixture) damage(t *testing.T, ck string, f func(b []byte) []byte) string {
	t.Helper()
	dir := sweepTempDir(t)
	copyDir(t, fx.dir, dir)
	p := filepath.Join(dir, fx.active)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
	switch ck {
	case "none":
		os.Remove(filepath.Join(dir, "checkpoint.json"))
	case "before":
		os.WriteFile(filepath.Join(dir, "checkpoint.json"), fx.ckBefore, 0o644)
	}
	return dir
}

// TestTornTailEveryOffset cuts, or zeroes from, every byte offset of the
// last two frames (CHECKLIST §1.7): the writable open keeps exactly the
// whole frames before the cut, truncates and reports the dropped bytes,
// continues the sequence, and a second open is clean; a read-only open
// serves the same prefix and changes nothing.
//
// Zeroing from offset k is what a crash leaves in a preallocated segment:
// the sectors an interrupted write did not reach read as zeros. Every
// such k is a torn tail, with or without a checkpoint: a zeroed header is
// the end of the log; a frame whose body holds zero bytes (a valid body
// never does) or whose length field lost its high bytes fails, and what
// follows it is zeros; a header cut inside its length field reads as a
// zero-length frame, which no variant has.
func TestTornTailEveryOffset(t *testing.T) {
	fx := newTornFixture(t, 450)
	n := len(fx.bounds) - 1 // frames in the highest segment
	from, end := fx.bounds[n-2], fx.bounds[n]
	for _, kind := range []string{"truncate", "zero"} {
		for _, ck := range []string{"none", "before", "kept"} {
			if kind == "truncate" && ck == "kept" {
				continue // a file shorter than the checkpoint's active_len: same as "none"
			}
			t.Run(kind+"/checkpoint="+ck, func(t *testing.T) {
				for k := from; k <= end; k++ {
					fx.checkTorn(t, kind, ck, k)
				}
			})
		}
	}
}

func (fx *tornFixture) checkTorn(t *testing.T, kind, ck string, k int64) {
	t.Helper()
	cut := func(b []byte) []byte {
		if kind == "truncate" {
			return b[:k]
		}
		for i := k; i < int64(len(b)); i++ {
			b[i] = 0
		}
		return b
	}
	n := len(fx.bounds) - 1
	kept := 0 // whole frames of the highest segment before k
	for kept < n && fx.bounds[kept+1] <= k {
		kept++
	}
	if ck == "kept" && kept < n {
		// The last checkpoint names the full segment, which a crash
		// cannot leave damaged: a zeroed acknowledged frame is
		// corruption.
		dir := fx.damage(t, ck, cut)
		s, err := localseg.Open(dir, fx.opts)
		if err == nil {
			_, err = s.Scan(0, 1000)
			s.Close()
		}
		if !errors.Is(err, localseg.ErrCorrupt) {
			t.Fatalf("k=%d: damage below a trusted checkpoint's active_len: %v, want corruption", k, err)
		}
		return
	}
	wantTip := uint64(fx.first + kept)
	// The dropped bytes are counted up to the last non-zero one (a zero
	// byte of a header, like the magic's second, is indistinguishable
	// from preallocated space).
	orig, _ := os.ReadFile(filepath.Join(fx.dir, fx.active))
	wantTorn := int64(0)
	for i := k - 1; i >= fx.bounds[kept]; i-- {
		if orig[i] != 0 {
			wantTorn = i + 1 - fx.bounds[kept]
			break
		}
	}
	where := fmt.Sprintf("%s at %d (checkpoint %s, %d whole frames kept)", kind, k, ck, kept)

	// Read-only first, on its own copy: serves the prefix, changes nothing.
	roDir := fx.damage(t, ck, cut)
	before := dirBytes(t, roDir)
	ro, err := localseg.Open(roDir, localseg.Options{ReadOnly: true, SegmentMaxBytes: fx.opts.SegmentMaxBytes})
	if err != nil {
		t.Fatalf("%s: read-only open: %v", where, err)
	}
	if ro.Tip() != wantTip {
		t.Fatalf("%s: read-only tip %d, want %d", where, ro.Tip(), wantTip)
	}
	wantRecords(t, scanAll(t, ro), fx.evs[:wantTip], 1)
	closeT(t, ro)
	if !sameFiles(before, dirBytes(t, roDir)) {
		t.Fatalf("%s: the read-only open changed the files", where)
	}

	dir := fx.damage(t, ck, cut)
	s, err := localseg.Open(dir, fx.opts)
	if err != nil {
		t.Fatalf("%s: open: %v", where, err)
	}
	rep := s.OpenReport()
	if rep.TornTailBytes != wantTorn || (wantTorn > 0 && rep.TornTailSegment == 0) {
		t.Fatalf("%s: report %+v, want %d torn bytes", where, rep, wantTorn)
	}
	if s.Tip() != wantTip {
		t.Fatalf("%s: tip %d, want %d", where, s.Tip(), wantTip)
	}
	wantRecords(t, scanAll(t, s), fx.evs[:wantTip], 1)
	next := evt("next", int(k))
	if seq := mustAppend(t, s, next); seq != wantTip+1 {
		t.Fatalf("%s: next append got %d", where, seq)
	}
	closeT(t, s)
	for _, mode := range []string{"checkpoint", "replay"} {
		if mode == "replay" {
			os.Remove(filepath.Join(dir, "checkpoint.json"))
		}
		s = openT(t, dir, fx.opts)
		if rep := s.OpenReport(); rep.TornTailBytes != 0 || (mode == "checkpoint" && rep.Replayed) {
			t.Fatalf("%s: second open (%s): %+v", where, mode, rep)
		}
		wantRecords(t, scanAll(t, s), append(fx.evs[:wantTip:wantTip], next), 1)
		closeT(t, s)
	}
}

// TestBitFlipEveryByte flips one bit in every byte of three frames: one in
// a sealed segment, one not last in the highest segment, and the last one.
//
// Case analysis. In a sealed segment nothing may be invalid: every flip is
// corruption, at open without a checkpoint and at the first read with a
// trusted one (CHECKLIST §1.8). A frame of the highest segment with a valid
// frame after it is never a torn tail (a torn write leaves nothing valid
// behind it that could have been acknowledged), so every flip there is
// corruption too: a wrong magic, a length that makes the CRC fail, a length
// that runs past the end or swallows the next frame (which still starts
// with a valid header inside it), a flipped CRC or body byte. The last frame
// differs only without a checkpoint: a flip that looks like a torn write —
// a length grown into the zeros that follow, the magic's first byte (0x01)
// or a body byte (a space or '@') turned to zero — is read as a torn tail
// and dropped (reported, never served altered); every other flip is
// corruption. With a trusted checkpoint the last frame is below its
// active_len, was fsynced, and every flip is corruption.
func TestBitFlipEveryByte(t *testing.T) {
	dir := sweepTempDir(t)
	o := localseg.Options{SegmentMaxBytes: 1500}
	s := openT(t, dir, o)
	var evs []localseg.Event
	for i := range 11 {
		ev := localseg.Event{ExecutionID: "e", TransactionID: fmt.Sprint("t", i), Payload: fmt.Sprintf("%d %s@", i, strings.Repeat("abc def ", 30))}
		mustAppend(t, s, ev)
		evs = append(evs, ev)
	}
	snap, _ := s.Snapshot()
	closeT(t, s)
	segs := snap.Segments
	if len(segs) < 3 || segs[len(segs)-1].Events < 2 {
		t.Fatalf("fixture segments %+v", segs)
	}
	hi := segs[len(segs)-1]
	sealedBounds := frameBounds(t, filepath.Join(dir, localseg.SegmentFileName(1)), segs[0].Size)
	hiBounds := frameBounds(t, filepath.Join(dir, localseg.SegmentFileName(hi.ID)), hi.Size)
	nh := len(hiBounds) - 1
	targets := []struct {
		name      string
		seg       uint64
		start     int64
		end       int64
		lastFrame bool
	}{
		{"sealed", 1, sealedBounds[1], sealedBounds[2], false},
		{"not last", hi.ID, hiBounds[nh-2], hiBounds[nh-1], false},
		{"last", hi.ID, hiBounds[nh-1], hiBounds[nh], true},
	}
	for _, tg := range targets {
		for _, ck := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/checkpoint=%v", tg.name, ck), func(t *testing.T) {
				torn, corrupt := 0, 0
				for i := tg.start; i < tg.end; i++ {
					flipped := sweepTempDir(t)
					copyDir(t, dir, flipped)
					if !ck {
						os.Remove(filepath.Join(flipped, "checkpoint.json"))
					}
					p := filepath.Join(flipped, localseg.SegmentFileName(tg.seg))
					b, _ := os.ReadFile(p)
					old := b[i]
					b[i] ^= 1 << (i % 8)
					os.WriteFile(p, b, 0o644)
					// The case analysis above, for the last frame without a
					// checkpoint: torn only when the flip looks like a lost
					// sector.
					rel := i - tg.start
					wantTorn := tg.lastFrame && !ck && (rel < 4 && b[i] == 0 || // the magic's 0x01 zeroed
						rel >= 4 && rel < 8 && b[i] > old || // a longer length: the frame runs into zeros
						rel >= 12 && b[i] == 0) // a zero byte in the body
					where := fmt.Sprintf("byte %d (+%d) bit %d", i, i-tg.start, i%8)

					s, err := localseg.Open(flipped, o)
					var recs []localseg.Record
					if err == nil {
						if ck && s.OpenReport().Replayed {
							t.Fatalf("%s: the open replayed despite a trusted checkpoint", where)
						}
						var p localseg.Page
						p, err = s.Scan(0, 100)
						recs = p.Records
						rep := s.OpenReport()
						s.Close()
						if err == nil {
							// Only a torn last frame may open cleanly.
							if !wantTorn || rep.TornTailBytes != tg.end-tg.start || len(recs) != len(evs)-1 {
								t.Fatalf("%s: opened with %d records, report %+v", where, len(recs), rep)
							}
							wantRecords(t, recs, evs[:len(evs)-1], 1)
							torn++
							continue
						}
					}
					var ce *localseg.CorruptionError
					if wantTorn {
						t.Fatalf("%s: %v, want a torn tail", where, err)
					}
					if !errors.As(err, &ce) || ce.Segment != tg.seg || ce.Offset != tg.start {
						t.Fatalf("%s: %v, want corruption of segment %d at %d", where, err, tg.seg, tg.start)
					}
					corrupt++
				}
				t.Logf("%d flips: %d corruption, %d torn tail", tg.end-tg.start, corrupt, torn)
				if corrupt == 0 {
					t.Fatal("no flip was detected as corruption")
				}
			})
		}
	}
}

// CHECKLIST §1.16 and §1.18.
func TestCheckpoint(t *testing.T) {
	o := localseg.Options{SegmentMaxBytes: 2048}
	build := func(t *testing.T) (string, []localseg.Event, map[string][]byte) {
		dir := t.TempDir()
		s := openT(t, dir, o)
		saved := map[string][]byte{}
		evs := appendMany(t, s, 3, 2)
		saved["segment1"], _ = os.ReadFile(filepath.Join(dir, "checkpoint.json"))
		if _, err := s.Pull("c", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Ack("c", 2); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, appendMany(t, s, 30, 2)...)
		saved["samesegment"], _ = os.ReadFile(filepath.Join(dir, "checkpoint.json"))
		if _, err := s.Pull("d", 1); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, appendMany(t, s, 2, 2)...)
		closeT(t, s)
		return dir, evs, saved
	}
	check := func(t *testing.T, dir string, evs []localseg.Event, wantReplay bool) {
		t.Helper()
		s := openT(t, dir, o)
		defer closeT(t, s)
		if rep := s.OpenReport(); rep.Replayed != wantReplay {
			t.Fatalf("replayed %v, want %v", rep.Replayed, wantReplay)
		}
		if s.Tip() != uint64(len(evs)) {
			t.Fatalf("tip %d, want %d", s.Tip(), len(evs))
		}
		snap, err := s.Snapshot()
		if err != nil || len(snap.Consumers) != 2 || snap.Consumers["c"] != 2 || snap.Consumers["d"] != 0 {
			t.Fatalf("consumers %v %v", snap.Consumers, err)
		}
		wantRecords(t, scanAll(t, s), evs, 1)
	}

	t.Run("trusted: no replay until the first read", func(t *testing.T) {
		dir, evs, _ := build(t)
		s := openT(t, dir, o)
		if rep := s.OpenReport(); rep.Replayed || localseg.ReplayRunsForTest(s) != 0 || s.IndexBytes() != 0 {
			t.Fatalf("open replayed: %+v, %d replays", rep, localseg.ReplayRunsForTest(s))
		}
		if s.Tip() != uint64(len(evs)) {
			t.Fatalf("tip %d", s.Tip())
		}
		// Appends and a snapshot do not replay either.
		mustAppend(t, s, evt("x", 1))
		if _, err := s.Snapshot(); err != nil || localseg.ReplayRunsForTest(s) != 0 {
			t.Fatalf("snapshot replayed (%v)", err)
		}
		if _, err := s.Scan(0, 1); err != nil {
			t.Fatal(err)
		}
		if localseg.ReplayRunsForTest(s) != 1 || s.IndexBytes() == 0 {
			t.Fatalf("first read: %d replays, index %d bytes", localseg.ReplayRunsForTest(s), s.IndexBytes())
		}
		closeT(t, s)
		check(t, dir, append(evs, evt("x", 1)), false)
	})
	t.Run("missing: replay and recreate", func(t *testing.T) {
		dir, evs, _ := build(t)
		os.Remove(filepath.Join(dir, "checkpoint.json"))
		check(t, dir, evs, true)
		if _, err := os.Stat(filepath.Join(dir, "checkpoint.json")); err != nil {
			t.Fatal("not recreated")
		}
		check(t, dir, evs, false)
	})
	t.Run("stale: another segment", func(t *testing.T) {
		dir, evs, saved := build(t)
		os.WriteFile(filepath.Join(dir, "checkpoint.json"), saved["segment1"], 0o644)
		check(t, dir, evs, true)
		check(t, dir, evs, false)
	})
	t.Run("frame at active_len: replay forward", func(t *testing.T) {
		dir, evs, saved := build(t)
		os.WriteFile(filepath.Join(dir, "checkpoint.json"), saved["samesegment"], 0o644)
		check(t, dir, evs, true)
		check(t, dir, evs, false)
	})
	for name, garble := range map[string]func(b []byte) []byte{
		"garbled: truncated":   func(b []byte) []byte { return b[:len(b)/2] },
		"garbled: not JSON":    func([]byte) []byte { return []byte("\x00\x01garbage") },
		"garbled: torn sector": func(b []byte) []byte { b[10] = '9'; return b },
		"garbled: empty":       func([]byte) []byte { return nil },
		"garbled: a lying edit": func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"event_count":35`, `"event_count":34`, 1))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, evs, _ := build(t)
			p := filepath.Join(dir, "checkpoint.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, garble(b), 0o644)
			check(t, dir, evs, true)
		})
	}
	t.Run("survives rollover and consumer state", func(t *testing.T) {
		dir, evs, _ := build(t)
		check(t, dir, evs, false)
		s := openT(t, dir, o)
		snap, _ := s.Snapshot()
		closeT(t, s)
		if len(snap.Segments) < 3 {
			t.Fatalf("no rollover: %+v", snap.Segments)
		}
	})
	t.Run("a checkpoint that lies is caught at the first read", func(t *testing.T) {
		dir, evs, _ := build(t)
		// Forge a self-consistent checkpoint (valid crc32) with one
		// event too many: the O(1) open trusts it, the first read's
		// replay refuses it.
		s := openT(t, dir, o)
		snap, _ := s.Snapshot()
		closeT(t, s)
		act := snap.Segments[len(snap.Segments)-1]
		forged := localseg.EncodeCheckpointForTest(uint64(len(evs)+1), act.ID, act.Size, map[string]uint64{"c": 2, "d": 0})
		os.WriteFile(filepath.Join(dir, "checkpoint.json"), forged, 0o644)
		s = openT(t, dir, o)
		defer closeT(t, s)
		if s.OpenReport().Replayed || s.Tip() != uint64(len(evs)+1) {
			t.Fatalf("forged checkpoint not trusted: %+v", s.OpenReport())
		}
		if _, err := s.Scan(0, 1); !errors.Is(err, localseg.ErrCorrupt) {
			t.Fatalf("first read: %v, want corruption", err)
		}
	})
}
