package localseg

// This file is what other packages may know about a store directory
// (docs/FORMAT.md §3) without spelling its file names: whether a directory
// holds a store, its records read as found, the bucket record, and the
// import of segment files written elsewhere. Only localseg names the files.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// bucketRecordName is the bucket record (FORMAT.md §3.8): the bucket the
// store ships to. The store itself never reads it; the engine does, through
// ReadBucketRecord and WriteBucketRecord.
const bucketRecordName = "bucket.json"

// unreadableBucketURL is what ReadBucketRecord returns for a record that
// does not parse: it still says the store ships.
const unreadableBucketURL = "(unreadable bucket.json)"

// IsStore reports whether dir holds a store: a segment file (or a file
// named like one), the reclaim manifest, the checkpoint or a segment index
// file. A store that lost its segment files still holds its checkpoint
// (written once the first segment is durable) or index files: it is a
// store to open, and refuse as a lost state, not an empty directory to
// hydrate over. A missing dir holds none.
func IsStore(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if IsStoreFile(e.Name()) {
			return true, nil
		}
	}
	return false, nil
}

// IsSegmentFile reports whether base is named like a segment file (a
// temporary name is not).
func IsSegmentFile(base string) bool {
	return strings.HasPrefix(base, segPrefix) && strings.HasSuffix(base, segSuffix)
}

// IsLockFile reports whether base is the store's writer lock, the first
// file a writable open creates.
func IsLockFile(base string) bool { return base == lockName }

// LockPath is the path of dir's writer lock.
func LockPath(dir string) string { return filepath.Join(dir, lockName) }

// ReadCheckpointFile returns dir's checkpoint as found (nil and no error
// when there is none). It is a cache; its bytes are for display.
func ReadCheckpointFile(dir string) ([]byte, error) {
	return readIfExists(filepath.Join(dir, checkpointName))
}

// ReadReclaimManifestFile returns dir's reclaim manifest as found (nil and
// no error when there is none); ReadReclaimManifest parses it.
func ReadReclaimManifestFile(dir string) ([]byte, error) {
	return readIfExists(filepath.Join(dir, manifestName))
}

func readIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// RemoveCheckpoint deletes dir's checkpoint (none is success), so the next
// open replays the segments.
func RemoveCheckpoint(dir string) error {
	err := os.Remove(filepath.Join(dir, checkpointName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// bucketRecord is the body of the bucket record.
type bucketRecord struct {
	URL string `json:"url"`
}

// BucketRecordPath is the path of dir's bucket record, for a message that
// tells an operator which file to remove.
func BucketRecordPath(dir string) string { return filepath.Join(dir, bucketRecordName) }

// ReadBucketRecord returns the bucket URL dir records and whether it
// records one. A record that does not parse still says the store ships:
// ok is true and url says it is unreadable.
func ReadBucketRecord(dir string) (url string, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, bucketRecordName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var r bucketRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return unreadableBucketURL, true, nil
	}
	return r.URL, true, nil
}

// WriteBucketRecord durably records url as the bucket dir ships to: temp
// file, fsync, rename, directory fsync.
func WriteBucketRecord(fsys FS, dir, url string) error {
	data, err := json.Marshal(bucketRecord{URL: url})
	if err != nil {
		return err
	}
	return writeDurably(fsys, dir, bucketRecordName, data)
}

// RemoveSegmentFile removes segment id from dir (a cold load drops the
// segments it wrote beyond a gap).
func RemoveSegmentFile(fsys FS, dir string, id uint64) error {
	return fsys.Remove(filepath.Join(dir, SegmentFileName(id)))
}

// ImportSegments moves the segment files of the store in from into dir,
// where the segments below first already are (written by WriteSegmentFile
// above the base WriteReclaimManifest recorded): they must run
// consecutively from first, and at least one must exist. Each segment's
// index file moves with it when there is one (a cache the first read uses
// only if the segment still hashes to its digest, so a failure to move it
// costs that read a full parse). synced reports whether a file was already
// fsynced; any other segment file is fsynced before it moves. The caller
// removes from afterwards (its manifest, checkpoint and lock describe that
// store only) and syncs dir.
func ImportSegments(fsys FS, synced func(path string) bool, from, dir string, first uint64) error {
	names, err := fsys.ReadDir(from)
	if err != nil {
		return fmt.Errorf("localseg: read %s: %w", from, err)
	}
	want := first
	for _, name := range names {
		id, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		if id != want {
			return fmt.Errorf("localseg: the store in %s holds segment %d, want %d", from, id, want)
		}
		want++
		src := filepath.Join(from, name)
		if !synced(filepath.Clean(src)) {
			// A file the other store never closed after writing: make
			// it durable here (defensive; localseg closes every segment).
			if err := syncFile(fsys, src); err != nil {
				return fmt.Errorf("localseg: fsync segment %d: %w", id, err)
			}
		}
		if err := fsys.Rename(src, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("localseg: move segment %d: %w", id, err)
		}
		idx := SegmentIndexFileName(id)
		_ = fsys.Rename(filepath.Join(from, idx), filepath.Join(dir, idx))
	}
	if want == first {
		return fmt.Errorf("localseg: the store in %s holds no segment", from)
	}
	return nil
}

// syncFile fsyncs the file at path.
func syncFile(fsys FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
