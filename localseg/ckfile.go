package localseg

// Reading and writing checkpoint.json (docs/FORMAT.md §4.5): the file the
// recovery trusts when its CRC and the segment it names agree.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// loadCheckpoint reads checkpoint.json; nil when it is missing or does not
// parse (the reason is logged: a replay follows, which is always correct).
func (s *Store) loadCheckpoint() (*checkpoint, int, error) {
	name := filepath.Join(s.dir, checkpointName)
	f, err := s.fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("localseg: open %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("localseg: stat %s: %w", name, err)
	}
	if st.Size() > 16<<20 {
		s.log.Warn("localseg: checkpoint ignored", "dir", s.dir, "reason", "too large")
		return nil, int(st.Size()), nil
	}
	b := make([]byte, st.Size())
	if err := readFull(f, b, 0); err != nil {
		return nil, 0, fmt.Errorf("localseg: read %s: %w", name, err)
	}
	c, err := parseCheckpoint(b)
	if err != nil {
		s.log.Warn("localseg: checkpoint ignored", "dir", s.dir, "reason", err)
		return nil, len(b), nil
	}
	return &c, len(b), nil
}

// openCheckpoint opens checkpoint.json for the writer and, when write is
// set, rewrites it from the current state and fsyncs it (and the directory
// when the file is new).
func (s *Store) openCheckpoint(write bool) error {
	name := filepath.Join(s.dir, checkpointName)
	_, statErr := s.fs.Stat(name)
	f, err := s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("localseg: open %s: %w", name, err)
	}
	s.ckpt = f
	if !write && statErr == nil {
		return nil
	}
	s.encodeCheckpointLocked()
	if err := s.writeCheckpoint(true); err != nil {
		return err
	}
	if statErr != nil {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
		}
	}
	return nil
}

// encodeCheckpointLocked encodes the durable state into ckptBuf; the
// checkpoint is no longer behind once the caller writes it.
func (s *Store) encodeCheckpointLocked() {
	a := s.active()
	s.ckptBuf = appendCheckpoint(s.ckptBuf[:0], s.tip, a.id, a.size, s.consNames, s.cons)
	s.ckptDirty, s.ckptAt = false, time.Now()
}

// writeCheckpoint writes ckptBuf over checkpoint.json in place, padded
// with blanks to the longest earlier content. It is not fsynced unless
// sync is set: it is a cache, and a lost or torn rewrite costs a replay at
// the next open (its crc32 makes a torn one fail to parse).
func (s *Store) writeCheckpoint(sync bool) error {
	b := s.ckptBuf
	for len(b) < s.ckptLen {
		b = append(b, ' ')
	}
	s.ckptBuf = b
	if _, err := s.ckpt.WriteAt(b, 0); err != nil {
		return fmt.Errorf("localseg: write checkpoint: %w", err)
	}
	s.ckptLen = max(s.ckptLen, len(b))
	if sync {
		if err := s.datasync(s.ckpt, true); err != nil {
			return fmt.Errorf("localseg: fsync checkpoint: %w", err)
		}
	}
	return nil
}
