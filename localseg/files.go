package localseg

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// File names inside a store directory.
const (
	checkpointName = "checkpoint.json"
	manifestName   = "reclaim.json"
	lockName       = "LOCK"
	tmpSuffix      = ".tmp"
	segPrefix      = "seg-"
	segSuffix      = ".eslog"
)

// parseSegmentName returns the id of a segment file name, or false for any
// other name (including a non-canonical spelling of a segment name, which
// is not ours and is left alone).
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != len(segPrefix)+16+len(segSuffix) || !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	digits := name[len(segPrefix) : len(segPrefix)+16]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || id == 0 {
		return 0, false
	}
	return id, true
}

// readFull reads len(p) bytes at off. A short file is io.ErrUnexpectedEOF.
func readFull(f io.ReaderAt, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// zeros is a source of zero bytes for preallocation.
var zeros [1 << 20]byte

// writeZeros writes zeros over [from, to) of f.
func writeZeros(f File, from, to int64) error {
	for off := from; off < to; {
		n := min(to-off, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// isAllZero reports whether b holds only zero bytes.
func isAllZero(b []byte) bool {
	for len(b) >= 8 {
		if le64b(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// lastNonZero returns the index of the last non-zero byte of b, or -1.
func lastNonZero(b []byte) int {
	i := len(b)
	for i >= 8 && le64b(b[i-8:]) == 0 {
		i -= 8
	}
	for i > 0 {
		if b[i-1] != 0 {
			return i - 1
		}
		i--
	}
	return -1
}

func le64b(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// makeDirDurable creates dir (and missing parents) and fsyncs the parent of
// dir and of every directory it created. The parent is synced even when dir
// already existed: an earlier process may have created it and died before
// its entry was durable, and appends acknowledged into it would vanish with
// it.
func makeDirDurable(fsys FS, dir string) error {
	dir = filepath.Clean(dir)
	var created []string
	for d := dir; ; {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(created) > 0 {
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if len(created) == 0 || created[0] != dir {
		created = append([]string{dir}, created...)
	}
	for _, d := range created {
		if p := filepath.Dir(d); p != d {
			if err := fsys.SyncDir(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteSegmentFile durably creates segment id in dir with data (used by a
// cold load). It writes a temporary file, fsyncs it and renames it into
// place, so a crash never leaves a partial file under a segment name. The
// caller syncs the directory once after the last file. A segment written
// this way is sealed only once a higher one exists: write an empty
// successor (data nil) to make the downloaded ones immutable.
func WriteSegmentFile(fsys FS, dir string, id uint64, data []byte) error {
	if id == 0 {
		return fmt.Errorf("%w: segment id 0", ErrInvalidInput)
	}
	final := filepath.Join(dir, SegmentFileName(id))
	tmp := final + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("localseg: create %s: %w", tmp, err)
	}
	if len(data) > 0 {
		if _, err = f.WriteAt(data, 0); err != nil {
			err = fmt.Errorf("localseg: write %s: %w", tmp, err)
		}
	}
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("localseg: fsync %s: %w", tmp, err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("localseg: close %s: %w", tmp, cerr)
	}
	if err == nil {
		if err = fsys.Rename(tmp, final); err != nil {
			err = fmt.Errorf("localseg: rename %s: %w", tmp, err)
		}
	}
	if err != nil {
		_ = fsys.Remove(tmp)
	}
	return err
}

// ReadReclaimManifest reads reclaim.json (zero when absent). A manifest
// that does not parse is an error wrapping ErrCorrupt: it is durable truth
// (written atomically), so damage to it is never guessed around.
func ReadReclaimManifest(fsys FS, dir string) (ReclaimManifest, error) {
	b, ok, err := readSmallFile(fsys, dir, manifestName, 1<<16)
	if err != nil || !ok {
		return ReclaimManifest{}, err
	}
	name := filepath.Join(dir, manifestName)
	m, err := parseReclaimManifest(b)
	if err != nil {
		return ReclaimManifest{}, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// parseReclaimManifest parses the body of reclaim.json. Both fields are
// required; unknown fields are ignored.
func parseReclaimManifest(b []byte) (ReclaimManifest, error) {
	var raw struct {
		Seq *json.Number `json:"reclaimed_through_seq"`
		Seg *json.Number `json:"reclaimed_through_segment"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return ReclaimManifest{}, fmt.Errorf("%w: reclaim manifest: %v", ErrCorrupt, err)
	}
	if raw.Seq == nil || raw.Seg == nil {
		return ReclaimManifest{}, fmt.Errorf("%w: reclaim manifest misses a field", ErrCorrupt)
	}
	seq, err1 := strconv.ParseUint(raw.Seq.String(), 10, 64)
	seg, err2 := strconv.ParseUint(raw.Seg.String(), 10, 64)
	if err1 != nil || err2 != nil {
		return ReclaimManifest{}, fmt.Errorf("%w: reclaim manifest: not unsigned integers", ErrCorrupt)
	}
	return ReclaimManifest{ReclaimedThroughSeq: seq, ReclaimedThroughSegment: seg}, nil
}

func (m ReclaimManifest) encode() []byte {
	b := []byte(`{"reclaimed_through_seq":`)
	b = strconv.AppendUint(b, m.ReclaimedThroughSeq, 10)
	b = append(b, `,"reclaimed_through_segment":`...)
	b = strconv.AppendUint(b, m.ReclaimedThroughSegment, 10)
	return append(b, "}\n"...)
}

// WriteReclaimManifest commits reclaim.json: temp file, fsync, rename,
// directory fsync. When it returns nil the manifest is durable.
func WriteReclaimManifest(fsys FS, dir string, m ReclaimManifest) error {
	return writeDurably(fsys, dir, manifestName, m.encode())
}

// readSmallFile reads dir/name whole; ok is false when it does not exist.
// A file over max bytes is an error wrapping ErrCorrupt (every caller reads
// a small record the engine wrote itself, so a large one is damage, and is
// never read into memory).
func readSmallFile(fsys FS, dir, name string, max int64) (b []byte, ok bool, err error) {
	path := filepath.Join(dir, name)
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("localseg: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("localseg: stat %s: %w", path, err)
	}
	if st.Size() > max {
		return nil, false, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, path, st.Size())
	}
	b = make([]byte, st.Size())
	if err := readFull(f, b, 0); err != nil {
		return nil, false, fmt.Errorf("localseg: read %s: %w", path, err)
	}
	return b, true, nil
}

// writeDurably replaces dir/name with data: a temporary file written and
// fsynced, renamed into place, the directory fsynced. When it returns nil
// the file is durable; on an error the previous file (if any) is intact.
func writeDurably(fsys FS, dir, name string, data []byte) error {
	final := filepath.Join(dir, name)
	tmp := final + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("localseg: create %s: %w", tmp, err)
	}
	if _, err = f.WriteAt(data, 0); err != nil {
		err = fmt.Errorf("localseg: write %s: %w", tmp, err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("localseg: fsync %s: %w", tmp, err)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("localseg: close %s: %w", tmp, cerr)
	}
	if err == nil {
		if err = fsys.Rename(tmp, final); err != nil {
			err = fmt.Errorf("localseg: rename %s: %w", tmp, err)
		}
	}
	if err == nil {
		if err = fsys.SyncDir(dir); err != nil {
			err = fmt.Errorf("localseg: fsync directory %s: %w", dir, err)
		}
	}
	return err
}
