package localseg_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// Index files of sealed segments (segindex.go): a cache the first read
// loads instead of parsing a sealed segment, trusted only when the
// segment's bytes still hash to the digest it records.

func idxFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, b := range dirBytes(t, dir) {
		if strings.HasSuffix(name, ".idx") {
			out[name] = b
		}
	}
	return out
}

func removeIdxFiles(t testing.TB, dir string) {
	t.Helper()
	for name := range idxFiles(t, dir) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// writeMixedStore writes events (some with escapes, some segments without
// any) and consumer frames over many small sealed segments, and returns the
// events in sequence order.
func writeMixedStore(t *testing.T, dir string) []localseg.Event {
	t.Helper()
	s := openT(t, dir, small)
	var evs []localseg.Event
	for i := range 60 {
		ev := localseg.Event{ExecutionID: fmt.Sprintf("exec-%d", i%5), TransactionID: fmt.Sprintf("t%d", i), Payload: strings.Repeat("p", i%40)}
		if i >= 30 {
			ev = evt(fmt.Sprintf("e%d", i%3), i) // quotes, backslashes, non-ASCII
		}
		mustAppend(t, s, ev)
		evs = append(evs, ev)
		switch i {
		case 10:
			if _, err := s.Pull("c1", 1); err != nil {
				t.Fatal(err)
			}
		case 20:
			if _, err := s.Ack("c1", 15); err != nil {
				t.Fatal(err)
			}
		case 40:
			if _, err := s.Pull("c2", 1); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteConsumer("c1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Ack("c2", 50); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	return evs
}

// The writer's index files are byte for byte what a full replay of the
// same segments writes: the builder mirrors the scan (offsets, execution
// ids, consumer frames, the plain flag), and reads through either are the
// same.
func TestSegmentIndexFilesMatchAReplay(t *testing.T) {
	// A writer that never reads (so never replays) leaves one for every
	// segment it sealed, its first included.
	plain := t.TempDir()
	s := openT(t, plain, small)
	appendMany(t, s, 40, 3)
	closeT(t, s)
	if n, sealed := len(idxFiles(t, plain)), len(segFiles(t, plain))-1; n != sealed || sealed < 3 {
		t.Fatalf("a writer left %d index files for %d sealed segments", n, sealed)
	}

	// Large groups (AppendBatch), whose bookkeeping runs beside their
	// fdatasync, give the same files as a replay.
	big := t.TempDir()
	s = openT(t, big, localseg.Options{SegmentMaxBytes: 256 << 10})
	var bigEvs []localseg.Event
	for b := range 12 {
		batch := make([]localseg.Event, 60)
		for i := range batch {
			batch[i] = localseg.Event{ExecutionID: fmt.Sprintf("x%d", i%7), TransactionID: fmt.Sprintf("t%d-%d", b, i), Payload: strings.Repeat("q", 1000)}
			if b%3 == 0 && i == 5 {
				batch[i].Payload = "needs \"escapes\" \\ here"
			}
		}
		if _, _, err := s.AppendBatch(batch); err != nil {
			t.Fatal(err)
		}
		bigEvs = append(bigEvs, batch...)
	}
	closeT(t, s)
	bigWritten := idxFiles(t, big)
	if len(bigWritten) < 2 {
		t.Fatalf("%d index files after large groups", len(bigWritten))
	}
	removeIdxFiles(t, big)
	s = openT(t, big, localseg.Options{SegmentMaxBytes: 256 << 10})
	wantRecords(t, scanAll(t, s), bigEvs, 1)
	closeT(t, s)
	for name, b := range bigWritten {
		if !bytes.Equal(idxFiles(t, big)[name], b) {
			t.Fatalf("%s (large groups): the writer's index file differs from the replay's", name)
		}
	}

	dir := t.TempDir()
	evs := writeMixedStore(t, dir)
	written := idxFiles(t, dir)
	if sealed := len(segFiles(t, dir)) - 1; len(written) != sealed || sealed < 5 {
		t.Fatalf("%d index files for %d sealed segments", len(written), sealed)
	}
	s = openT(t, dir, small)
	wantRecords(t, scanAll(t, s), evs, 1)
	if n := s.IndexFileLoads(); n != int64(len(written)) {
		t.Fatalf("the first read took %d segments from index files, want all %d", n, len(written))
	}
	closeT(t, s)

	removeIdxFiles(t, dir)
	s = openT(t, dir, small)
	wantRecords(t, scanAll(t, s), evs, 1)
	if n := s.IndexFileLoads(); n != 0 {
		t.Fatalf("%d segments taken from index files that do not exist", n)
	}
	p, err := s.ReadExecution("e1", 0, 100)
	if err != nil || len(p.Records) != 10 {
		t.Fatalf("read execution e1: %d records, %v", len(p.Records), err)
	}
	closeT(t, s)
	rebuilt := idxFiles(t, dir)
	if len(rebuilt) != len(written) {
		t.Fatalf("the replay wrote %d index files, the writer %d", len(rebuilt), len(written))
	}
	for name, b := range written {
		if !bytes.Equal(rebuilt[name], b) {
			t.Fatalf("%s: the writer's index file differs from the replay's", name)
		}
	}
}

// CHECKLIST §1.8 with index files present: a flipped bit anywhere in a
// sealed segment is still a hard error at the first read, naming the same
// segment and offset as without them. RED: trusting the index file without
// hashing the segment, the first read succeeds over the corrupt frame.
func TestSegmentIndexFileNeverHidesCorruption(t *testing.T) {
	src := t.TempDir()
	writeMixedStore(t, src)
	seg := segFiles(t, src)[2]
	size := func() int64 { fi, _ := os.Stat(seg); return fi.Size() }()
	bounds := frameBounds(t, seg, size)
	for _, tc := range []struct {
		name string
		at   int64 // byte flipped
	}{
		{"crc", bounds[1] + 8},
		{"body", bounds[1] + localseg.HeaderSize + 20},
		{"last byte", size - 1},
	} {
		for _, mode := range []string{"index files", "no index files", "RED: no digest check"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				dir := t.TempDir()
				copyDir(t, src, dir)
				if mode == "no index files" {
					removeIdxFiles(t, dir)
				}
				if mode == "RED: no digest check" {
					defer localseg.SkipSegmentDigestForTest()()
				}
				path := filepath.Join(dir, filepath.Base(seg))
				b, _ := os.ReadFile(path)
				b[tc.at] ^= 0x10
				os.WriteFile(path, b, 0o644)
				s := openT(t, dir, small)
				defer s.Close()
				_, err := s.Get(1)
				if mode == "RED: no digest check" {
					if err != nil {
						t.Fatalf("RED control: the first read failed (%v); the digest check is not what catches the flip", err)
					}
					return
				}
				var ce *localseg.CorruptionError
				if !errors.As(err, &ce) || ce.Segment != 3 || !errors.Is(err, localseg.ErrCorrupt) {
					t.Fatalf("first read: %v, want corruption in segment 3", err)
				}
				if i := slices.Index(bounds, ce.Offset); i < 0 || ce.Offset > tc.at || (i+1 < len(bounds) && bounds[i+1] <= tc.at) {
					t.Fatalf("corruption reported at %d, the flip is at %d (frames start at %v)", ce.Offset, tc.at, bounds)
				}
				if got := idxFiles(t, dir)[localseg.SegmentIndexFileName(3)]; mode == "no index files" && got != nil {
					t.Fatal("a replay that found corruption wrote an index file for the segment")
				}
			})
		}
	}
}

// A torn, damaged, foreign or stale index file is ignored: reads are
// exactly right, and a writable store replaces it with a valid one; a
// read-only open writes nothing.
func TestSegmentIndexFileDamageIsIgnored(t *testing.T) {
	src := t.TempDir()
	evs := writeMixedStore(t, src)
	good := idxFiles(t, src)
	name3, name4 := localseg.SegmentIndexFileName(3), localseg.SegmentIndexFileName(4)
	damage := map[string]func(b []byte) []byte{
		"truncated":         func(b []byte) []byte { return b[:len(b)/2] },
		"flipped":           func(b []byte) []byte { b = bytes.Clone(b); b[70] ^= 1; return b },
		"empty":             func([]byte) []byte { return nil },
		"another segment's": func([]byte) []byte { return good[name4] },
		"garbage":           func(b []byte) []byte { return bytes.Repeat([]byte{0xA5}, len(b)) },
	}
	for name, f := range damage {
		for _, ro := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/read-only=%v", name, ro), func(t *testing.T) {
				dir := t.TempDir()
				copyDir(t, src, dir)
				bad := f(good[name3])
				if err := os.WriteFile(filepath.Join(dir, name3), bad, 0o644); err != nil {
					t.Fatal(err)
				}
				o := small
				o.ReadOnly = ro
				s := openT(t, dir, o)
				wantRecords(t, scanAll(t, s), evs, 1)
				closeT(t, s)
				got := idxFiles(t, dir)[name3]
				if ro && !bytes.Equal(got, bad) {
					t.Fatal("a read-only open rewrote an index file")
				}
				if !ro && !bytes.Equal(got, good[name3]) {
					t.Fatal("the writable store did not replace the bad index file with a valid one")
				}
			})
		}
	}
}

// Reclaim removes a segment's index file with it, and an open removes the
// index files of segments at or below the reclaim manifest that a crash
// left behind.
func TestSegmentIndexFilesGoWithTheirSegments(t *testing.T) {
	dir := t.TempDir()
	writeMixedStore(t, dir)
	s := openT(t, dir, small)
	if _, err := s.Reclaim(3); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	for id := uint64(1); id <= 3; id++ {
		if _, ok := idxFiles(t, dir)[localseg.SegmentIndexFileName(id)]; ok {
			t.Fatalf("reclaim left the index file of segment %d", id)
		}
	}
	if _, ok := idxFiles(t, dir)[localseg.SegmentIndexFileName(4)]; !ok {
		t.Fatal("reclaim removed the index file of a kept segment")
	}
	orphan := filepath.Join(dir, localseg.SegmentIndexFileName(2))
	if err := os.WriteFile(orphan, []byte("left by a crash"), 0o644); err != nil {
		t.Fatal(err)
	}
	closeT(t, openT(t, dir, localseg.Options{SegmentMaxBytes: 1024, ReadOnly: true}))
	if _, err := os.Stat(orphan); err != nil {
		t.Fatal("a read-only open removed a file")
	}
	closeT(t, openT(t, dir, small))
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the open left the index file of a reclaimed segment: %v", err)
	}
}
