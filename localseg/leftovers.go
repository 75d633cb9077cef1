package localseg

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// classifyNames sorts a shard directory's names: the segment files above
// the reclaim base (kept, ascending), those at or below it (leftovers,
// ascending: a crash interrupted their unlinks), the index files of kept
// segments (idxs), and what recovery deletes besides the leftovers (tmps:
// unfinished temporary files of a durable replace, and the index files of
// reclaimed segments, which reclaim removes first and a crash can leave).
func classifyNames(names []string, reclaimedSeg uint64) (kept, leftovers, idxs []uint64, tmps []string) {
	for _, name := range names {
		if id, ok := parseSegmentName(name); ok {
			if id <= reclaimedSeg {
				leftovers = append(leftovers, id)
			} else {
				kept = append(kept, id)
			}
		} else if strings.HasSuffix(name, tmpSuffix) && (strings.HasPrefix(name, segPrefix) || strings.HasPrefix(name, manifestName) || strings.HasPrefix(name, shardName) || strings.HasPrefix(name, evictedName)) {
			tmps = append(tmps, name)
		} else if id, ok := parseSegmentIndexName(name); ok && id <= reclaimedSeg {
			tmps = append(tmps, name)
		} else if ok {
			idxs = append(idxs, id)
		}
	}
	slices.Sort(kept)
	slices.Sort(leftovers)
	return kept, leftovers, idxs, tmps
}

// removeLeftovers deletes what recovery found to delete (see
// classifyNames) and fsyncs the directory once.
func (s *Store) removeLeftovers(leftovers []uint64, tmps []string) error {
	if len(leftovers)+len(tmps) == 0 {
		return nil
	}
	// Segments at or below the reclaim manifest are gone by definition:
	// they are deleted without being read. Temporary files are unfinished
	// renames.
	for _, id := range leftovers {
		if err := s.fs.Remove(s.segPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("localseg: remove reclaimed segment %d: %w", id, err)
		}
	}
	for _, name := range tmps {
		if err := s.fs.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("localseg: remove %s: %w", name, err)
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
	}
	s.report.LeftoversRemoved = leftovers
	if len(leftovers) > 0 {
		s.log.Info("localseg: removed segments at or below the reclaim manifest", "dir", s.dir, "segments", leftovers)
	}
	return nil
}

// cleanup is what a recovery with Options.DeferCleanup left in place.
type cleanup struct {
	leftovers []uint64
	tmps      []string
	// repair is the highest segment's repair (truncating a torn tail,
	// re-writing what is kept, preallocating, the checkpoint), nil once
	// done.
	repair func() error
}

// repairPendingLocked runs the repair a recovery with Options.DeferCleanup
// left for later, before anything is written (every writer checks
// checkWritableLocked first). A failure poisons the store. The caller
// holds s.mu.
func (s *Store) repairPendingLocked() error {
	if s.deferred == nil || s.deferred.repair == nil {
		return nil
	}
	repair := s.deferred.repair
	s.deferred.repair = nil
	if err := repair(); err != nil {
		s.poisonLocked(err)
		return s.poison
	}
	return nil
}

// RemoveLeftovers deletes, on a store opened with Options.DeferCleanup,
// what its recovery left in place: the segment files at or below the
// reclaim base and the unfinished temporary files it found; first it makes
// the highest segment's repair (a torn tail truncated, what is kept
// re-written and fsynced, preallocation, the checkpoint), which otherwise
// runs at the first write. The owner
// calls it once the bucket's verdict lets the open go on (a refused open
// must change no byte), before the store is shared. A spare segment the
// store prepared since (it reuses the temporary name) is kept. It is a
// no-op otherwise, and after its first call.
func (s *Store) RemoveLeftovers() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.repairPendingLocked(); err != nil {
		return err
	}
	c := s.deferred
	if c == nil {
		return nil
	}
	s.deferred = nil
	for s.spareBusy {
		s.cond.Wait()
	}
	tmps := c.tmps
	if s.spareSeg != nil {
		tmps = slices.DeleteFunc(slices.Clone(tmps), func(n string) bool { return n == spareName })
	}
	return s.removeLeftovers(c.leftovers, tmps)
}

// OpenReport says what Open found and did.
func (s *Store) OpenReport() OpenReport {
	r := s.report
	r.LeftoversRemoved = append([]uint64(nil), r.LeftoversRemoved...)
	return r
}
