package localseg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The spare segment.
//
// A new segment is preallocated by writing zeros over its whole capacity
// and fsyncing it (see Preallocation in doc.go): 8 MiB written and flushed,
// about 10 ms on these disks, which at a rollover would hold up every
// appender. So once the active segment is half full, the leader of a group
// — after its group was acknowledged and the writer role passed on, so
// appends continue meanwhile — prepares the successor's file under the
// temporary name spareName: zeros, fsynced. The rollover then renames it
// into place and fsyncs the directory, as it would after creating the file.
// A crash leaves at most a spare under its temporary name, which the next
// writable open removes with the other temporary files; a store that never
// gets half full never has one. A failure to prepare it (ENOSPC, EIO)
// does not poison the store: the spare is an optimisation, no frame was
// written into it, and the rollover then creates the successor itself
// (without preallocation if the zeros do not fit either). The failure is
// logged, the partial spare removed, and no spare is tried again for the
// same active segment.

// spareName is the spare segment's file name.
const spareName = segPrefix + "spare" + segSuffix + tmpSuffix

// prepareSpareLocked prepares the spare when the active segment is half
// full and there is none. The caller holds s.mu (released during the I/O)
// and not the writer role.
func (s *Store) prepareSpareLocked() {
	active := s.active()
	if !s.prealloc || s.spareSeg != nil || s.spareBusy || s.poison != nil || s.closed ||
		2*active.size < s.maxSeg || s.spareFailed == active.id {
		return
	}
	s.spareBusy = true
	s.mu.Unlock()
	f, err := s.makeSpare()
	if err != nil {
		s.preallocFailures.Add(1)
		s.log.Warn("localseg: preparing the spare segment failed; the next segment is created at the rollover", "dir", s.dir, "err", err)
		if rerr := s.fs.Remove(filepath.Join(s.dir, spareName)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			s.log.Warn("localseg: removing the failed spare segment failed; the next open removes it", "dir", s.dir, "err", rerr)
		}
	}
	s.mu.Lock()
	s.spareBusy = false
	s.cond.Broadcast()
	if err != nil {
		s.spareFailed = active.id
		return
	}
	s.spareSeg = f
}

// makeSpare writes the spare: zeros over the segment capacity, fsynced.
func (s *Store) makeSpare() (File, error) {
	f, err := s.fs.OpenFile(filepath.Join(s.dir, spareName), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localseg: create the spare segment: %w", err)
	}
	if err := writeZeros(f, 0, s.maxSeg); err != nil {
		f.Close()
		return nil, fmt.Errorf("localseg: preallocate the spare segment: %w", err)
	}
	if err := s.datasync(f, true); err != nil {
		f.Close()
		return nil, fmt.Errorf("localseg: fsync the spare segment: %w", err)
	}
	return f, nil
}

// takeSpare renames the spare (waiting for one being prepared) into place
// as segment id and returns it, or nil when there is none. The caller holds
// the writer role, not s.mu, and syncs the directory.
func (s *Store) takeSpare(id uint64) (File, error) {
	s.mu.Lock()
	for s.spareBusy {
		s.cond.Wait()
	}
	f := s.spareSeg
	s.spareSeg = nil
	s.mu.Unlock()
	if f == nil {
		return nil, nil
	}
	if err := s.fs.Rename(filepath.Join(s.dir, spareName), s.segPath(id)); err != nil {
		f.Close()
		return nil, fmt.Errorf("localseg: rename the spare segment to segment %d: %w", id, err)
	}
	return f, nil
}

// dropSpareLocked waits for a spare being prepared, then closes and removes
// it (at Close: the next open would remove it anyway, but an idle store
// should not keep a segment's worth of zeros). The caller holds s.mu.
func (s *Store) dropSpareLocked() {
	for s.spareBusy {
		s.cond.Wait()
	}
	if s.spareSeg == nil {
		return
	}
	s.spareSeg.Close()
	s.spareSeg = nil
	if err := s.fs.Remove(filepath.Join(s.dir, spareName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("localseg: removing the spare segment failed; the next open removes it", "dir", s.dir, "err", err)
	}
}
