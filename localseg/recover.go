package localseg

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// recover opens the store's files and rebuilds its state (docs/FORMAT.md §4).
func (s *Store) recover() error {
	// The shard pair first, before the directory or its lock is touched.
	if _, err := s.checkShardPair(); err != nil {
		return err
	}
	if !s.readOnly {
		if err := makeDirDurable(s.fs, s.dir); err != nil {
			return fmt.Errorf("localseg: create %s: %w", s.dir, err)
		}
		l, err := s.fs.Lock(filepath.Join(s.dir, lockName))
		if err != nil {
			if errors.Is(err, ErrLocked) {
				return err
			}
			return fmt.Errorf("localseg: lock %s: %w", s.dir, err)
		}
		s.lock = l
		// Again under the lock: another writer may have recorded the
		// pair meanwhile.
		if s.shardRecorded, err = s.checkShardPair(); err != nil {
			return err
		}
	}
	m, err := ReadReclaimManifest(s.fs, s.dir)
	if err != nil {
		return err
	}
	s.reclaimedSeq, s.reclaimedSeg = m.ReclaimedThroughSeq, m.ReclaimedThroughSegment
	s.tip = s.reclaimedSeq

	// The checkpoint is read before the listing: everything it names was
	// durable before it was written, so a live writer (under a read-only
	// open) cannot make it claim more than the listing then shows.
	ck, ckFileLen, err := s.loadCheckpoint()
	if err != nil {
		return err
	}
	names, err := s.fs.ReadDir(s.dir)
	if err != nil && !(s.readOnly && errors.Is(err, fs.ErrNotExist)) {
		return fmt.Errorf("localseg: list %s: %w", s.dir, err)
	}
	kept, leftovers, idxs, tmps := classifyNames(names, s.reclaimedSeg)
	// Segments evicted to the bucket stand in for their files only
	// because evicted.json names them (evictrec.go); files it names are
	// swept like leftovers.
	kept, sweep, err := s.mergeEvicted(kept)
	if err != nil {
		return err
	}
	tmps = append(tmps, sweep...)
	// Before anything is changed: a refused open leaves the directory as
	// it found it.
	if s.jumps, err = ReadJumps(s.fs, s.dir); err != nil {
		return err
	}
	pending, err := checkSegmentIDs(kept, s.reclaimedSeg, s.jumps)
	if err != nil {
		return err
	}
	if err := s.checkNothingMissing(kept, leftovers, idxs, ck, ckFileLen >= 0); err != nil {
		return err
	}
	// The last check: an owner's open learns the unknown first events of
	// a lazy hydrate's segments, or is refused, before anything changes.
	if s.resolveFirsts {
		if err := s.resolveUnknownFirsts(); err != nil {
			return err
		}
	}
	if pending != nil && s.readOnly {
		// The jump's rename did not happen: read the segment where it is.
		s.jumps = slices.DeleteFunc(s.jumps, func(j Jump) bool { return j == *pending })
	} else if pending != nil {
		if err := s.completeJump(kept, pending); err != nil {
			return err
		}
	}
	if !s.readOnly && s.deferCleanup {
		s.deferred = &cleanup{leftovers: leftovers, tmps: tmps}
	} else if !s.readOnly {
		if err := s.removeLeftovers(leftovers, tmps); err != nil {
			return err
		}
	}
	if len(kept) == 0 {
		if s.readOnly {
			return nil
		}
		return s.createFirstSegment()
	}
	return s.recoverSegments(kept, ck, ckFileLen)
}

// rebuildHint ends the error of a store that lost durable files.
const rebuildHint = "; the store is not opened, because a shorter log would give the lost sequences to new events: restore the missing file, or, for a store that ships to a bucket, move the directory aside and rebuild it from the bucket (bucketlog restore, or an Open with the bucket hydrates an empty directory)"

// checkNothingMissing refuses a store whose own durable records show more
// than its files hold (docs/FORMAT.md §3; issue 12): a trusted checkpoint
// names a segment above the highest file; the index file of a segment
// exists with no successor (an index file is written only once its
// segment is sealed, after the successor's directory entry is durable);
// segment files at or below reclaim.json remain with none above them
// (reclaim never takes the active segment). kept are the retained segment
// ids (sorted, gapless), leftovers those at or below reclaim.json, idxs the
// index files above it, ck the checkpoint when it parses (an untrusted one
// is no evidence), except when no segment file is left at all: the store
// creates checkpoint.json only once its first segment is durable (and a cold
// load writes none), so ckFile (the file exists, parsing or not) then shows
// lost files. What a crash, GC, a cold load or a fresh start leaves (a
// new segment the checkpoint does not name yet, leftovers below a retained
// segment, reclaim.json alone, no checkpoint) passes.
func (s *Store) checkNothingMissing(kept, leftovers, idxs []uint64, ck *checkpoint, ckFile bool) error {
	var highest uint64
	if len(kept) > 0 {
		highest = kept[len(kept)-1]
	}
	switch {
	case ck != nil && ck.ActiveSegmentID > highest:
		return s.lostState(fmt.Sprintf("checkpoint.json names segment %d (%d events), the highest segment file is %s", ck.ActiveSegmentID, ck.EventCount, segOrNone(highest)))
	case len(kept) == 0 && len(leftovers) > 0:
		return s.lostState(fmt.Sprintf("reclaim.json reclaims through segment %d (sequence %d) and segment files below it remain, but no segment file above it exists", s.reclaimedSeg, s.reclaimedSeq))
	case len(kept) == 0 && ckFile:
		return s.lostState("checkpoint.json exists (it does not parse), but no segment file does")
	}
	for _, id := range idxs {
		if id >= highest {
			return s.lostState(fmt.Sprintf("the index file of sealed segment %d exists, the highest segment file is %s", id, segOrNone(highest)))
		}
	}
	return nil
}

func segOrNone(id uint64) string {
	if id == 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

// lostState is the error of a store missing durable state: what shows it.
func (s *Store) lostState(evidence string) error {
	return fmt.Errorf("%w: %s: %s%s", ErrLostState, s.dir, evidence, rebuildHint)
}

// createFirstSegment starts a store with no segment: id 1, or one above the
// last reclaimed.
func (s *Store) createFirstSegment() error {
	id := nextSegmentID(s.jumps, s.reclaimedSeg)
	f, err := s.createSegmentFile(id)
	if err != nil {
		return err
	}
	s.segs = []*segment{{id: id, known: true, f: f, ixb: newSegIdxBuilder(id)}}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
	}
	s.consNames = sortedNames(s.cons)
	return s.openCheckpoint(true)
}

// createSegmentFile creates segment id, preallocated to the segment cap
// unless preallocation is off, and fsyncs it. The caller syncs the
// directory.
func (s *Store) createSegmentFile(id uint64) (File, error) {
	name := s.segPath(id)
	f, err := s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localseg: create segment %d: %w", id, err)
	}
	if s.prealloc {
		if err := writeZeros(f, 0, s.maxSeg); err != nil {
			// Preallocation is an optimisation: the segment then grows
			// as frames are written (zeros that did land read as the
			// end of the log).
			s.preallocFailures.Add(1)
			s.log.Warn("localseg: preallocating a new segment failed; it grows as it is written", "dir", s.dir, "segment", id, "err", err)
		}
	}
	if err := s.datasync(f, true); err != nil {
		f.Close()
		return nil, fmt.Errorf("localseg: fsync new segment %d: %w", id, err)
	}
	return f, nil
}

// readSeg reads [from, to) of f into buf (grown as needed).
func readSeg(f File, id uint64, buf []byte, from, to int64) ([]byte, error) {
	n := to - from
	if n > maxSegmentFile {
		return buf, &CorruptionError{Segment: id, Offset: from, Err: fmt.Errorf("%w: segment file of %d bytes is larger than any writer produces", ErrCorrupt, to)}
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if err := readFull(f, buf, from); err != nil {
		return buf, fmt.Errorf("localseg: read segment %d: %w", id, err)
	}
	return buf, nil
}

// maxSegmentFile bounds what recovery reads into memory at once: far above
// any segment a writer of this format produces (15 MiB, or one frame of the
// 64 MiB reader cap), far below an absurd file.
const maxSegmentFile = 256 << 20

// recoverSegments recovers a store whose retained segments are ids.
func (s *Store) recoverSegments(ids []uint64, ck *checkpoint, ckFileLen int) error {
	highest := ids[len(ids)-1]
	for _, id := range ids[:len(ids)-1] {
		if en, ok := s.ev.get(id); ok {
			first, guess := en.First, en.First == FirstUnknown
			if guess {
				first = 0
			}
			s.segs = append(s.segs, &segment{id: id, size: en.Size, first: first, known: true, guess: guess, sealed: true})
			continue
		}
		st, err := s.fs.Stat(s.segPath(id))
		if err != nil {
			return fmt.Errorf("localseg: stat segment %d: %w", id, err)
		}
		s.segs = append(s.segs, &segment{id: id, size: st.Size(), sealed: true})
	}
	flag := os.O_RDWR
	if s.readOnly {
		flag = os.O_RDONLY
	}
	f, err := s.fs.OpenFile(s.segPath(highest), flag, 0)
	if err != nil {
		return fmt.Errorf("localseg: open segment %d: %w", highest, err)
	}
	active := &segment{id: highest}
	if s.readOnly {
		defer f.Close() // reads go through the reader cache
	} else {
		active.f = f
	}
	s.segs = append(s.segs, active)
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("localseg: stat segment %d: %w", highest, err)
	}
	size := st.Size()

	ckLen := int64(-1)
	if ck != nil && ck.ActiveSegmentID == highest && ck.ActiveLen <= size && ck.EventCount >= s.reclaimedSeq {
		ckLen = ck.ActiveLen
	}
	trusted := false
	if ckLen >= 0 {
		peek := make([]byte, min(size-ckLen, 4))
		if err := readFull(f, peek, ckLen); err != nil {
			return fmt.Errorf("localseg: read segment %d: %w", highest, err)
		}
		// End of file, or zeros where the next header would start: the
		// checkpoint covers everything (docs/FORMAT.md §4.3 trust rule).
		trusted = isAllZero(peek)
	}

	var data []byte // [from, size) of the highest segment, when read
	var from, end int64
	switch {
	case trusted:
		s.tip = ck.EventCount
		s.cons = maps.Clone(ck.Consumers)
		from, end = ckLen, ckLen
		if !s.readOnly && size > ckLen {
			// Only to find (and drop) leftovers of an interrupted write
			// beyond the zeros; this is a read, not a replay.
			k, err := lastNonZeroAt(f, highest, ckLen, size)
			if err != nil {
				return err
			}
			if k >= 0 {
				s.report.TornTailBytes = k + 1 - ckLen
			}
		}
	case ckLen >= 0:
		// A frame at active_len: appends the checkpoint missed. Replay
		// from there only.
		s.report.Replayed = true
		s.replayRuns.Add(1)
		if data, err = readSeg(f, highest, nil, ckLen, size); err != nil {
			return err
		}
		from = ckLen
		r := &replay{tip: ck.EventCount, cons: maps.Clone(ck.Consumers)}
		if end, err = r.walkTail(highest, data, ckLen, ckLen); err != nil {
			return err
		}
		s.tip, s.cons = r.tip, r.cons
		if ckLen == 0 {
			active.first, active.known = r.first, true
		}
	default:
		s.report.Replayed = true
		s.replayRuns.Add(1)
		var r *replay
		sealed := s.segs[:len(s.segs)-1]
		rgs := make([]segRange, len(sealed))
		copies := map[uint64]memFile{} // damaged sealed segments read from the bucket (heal.go)
		open := func(id uint64) (io.ReaderAt, func(), error) {
			if f, ok := copies[id]; ok {
				return f, func() {}, nil
			}
			if f, ok, err := s.remoteFile(id); ok {
				return f, func() {}, err
			}
			rf, err := s.fs.OpenFile(s.segPath(id), os.O_RDONLY, 0)
			if err != nil {
				return nil, nil, err
			}
			return rf, func() { rf.Close() }, nil
		}
		firsts := make([]uint64, len(sealed))
		for i, seg := range sealed {
			firsts[i] = seg.first
		}
		for {
			r = &replay{tip: s.reclaimedSeq, cons: make(map[string]uint64), idx: newIndex(), imported: s.ev.imported()}
			for i, seg := range sealed {
				rgs[i] = segRange{id: seg.id, to: seg.size, sealed: true}
				seg.first, seg.known = firsts[i], true // first stays as it was unless an event is found
			}
			err := r.replayRanges(open, s.segIdxFiles(), rgs, func(id, seq uint64) { s.segByID(id).first = seq })
			if err == nil {
				break
			}
			sealedSize := func(id uint64) (int64, bool) {
				if seg := s.segByID(id); seg != nil && seg.sealed {
					return seg.size, true
				}
				return 0, false
			}
			if !s.copyFor(err, copies, sealedSize) {
				return err
			}
		}
		if data, err = readSeg(f, highest, nil, 0, size); err != nil {
			return err
		}
		r.first = 0
		if end, err = r.walkTail(highest, data, 0, -1); err != nil {
			return err
		}
		active.first, active.known = r.first, true
		s.tip, s.cons, s.idx = r.tip, r.cons, r.idx
	}
	active.size = end
	if data != nil {
		if k := lastNonZero(data[end-from:]); k >= 0 {
			s.report.TornTailBytes = int64(k) + 1
		}
	}
	if s.report.TornTailBytes > 0 {
		s.report.TornTailSegment = highest
		s.log.Warn("localseg: torn tail", "dir", s.dir, "segment", highest, "offset", end, "bytes", s.report.TornTailBytes, "read_only", s.readOnly)
	}
	if !active.known {
		if first, err := probeFirstEvent(f, highest, end); err == nil {
			active.first, active.known = first, true
		}
	}
	s.consNames = sortedNames(s.cons)
	if ck != nil && ck.EventCount > s.tip {
		// Checked before any repair writes a byte.
		return s.lostState(fmt.Sprintf("checkpoint.json counts %d events, the segment files hold %d (segment %d ends at %d bytes, the checkpoint says %d)",
			ck.EventCount, s.tip, highest, end, ck.ActiveLen))
	}
	if s.readOnly {
		return nil
	}

	// Repair (writable only). Drop what lies beyond the logical end, so
	// later appends never sit in front of leftover bytes; re-write and
	// fsync what is kept beyond the checkpoint, because bytes read back
	// after a failed fsync may live only in the page cache; preallocate.
	if end == 0 {
		// This process writes the active segment from its first byte, so
		// it can leave its index file when it seals it.
		active.ixb = newSegIdxBuilder(highest)
	}
	repair := func() error { return s.repairActive(f, highest, data, from, end, size, ckLen, ckFileLen, trusted) }
	if s.deferred != nil {
		// Options.DeferCleanup: the owner's verdict comes first (a refused
		// open changes no byte, torn bytes included); RemoveLeftovers, or
		// the first write, repairs (repairPendingLocked).
		s.deferred.repair = repair
		return nil
	}
	return repair()
}

// repairActive is the writable open's repair of the highest segment f
// (recoverSegments): data holds [from, size) of it when it was read, end
// is its logical end, ckLen the trusted or replayed-from checkpoint length
// (-1: none) and ckFileLen checkpoint.json's length.
func (s *Store) repairActive(f File, highest uint64, data []byte, from, end, size, ckLen int64, ckFileLen int, trusted bool) error {
	rewriteFrom := max(ckLen, 0)
	changed := false
	if s.report.TornTailBytes > 0 || (size > end && !s.prealloc) {
		if err := f.Truncate(end); err != nil {
			return fmt.Errorf("localseg: truncate the torn tail of segment %d: %w", highest, err)
		}
		size, changed = end, true
	}
	if end > rewriteFrom {
		if _, err := f.WriteAt(data[rewriteFrom-from:end-from], rewriteFrom); err != nil {
			return fmt.Errorf("localseg: re-write segment %d: %w", highest, err)
		}
		changed = true
	}
	if s.prealloc && size < s.maxSeg {
		if err := writeZeros(f, size, s.maxSeg); err != nil {
			// An optimisation, as for a new segment.
			s.preallocFailures.Add(1)
			s.log.Warn("localseg: preallocating the active segment failed; it grows as it is written", "dir", s.dir, "segment", highest, "err", err)
		}
		changed = true
	}
	if changed {
		if err := s.datasync(f, true); err != nil {
			return fmt.Errorf("localseg: fsync segment %d: %w", highest, err)
		}
	}
	if trusted {
		// A checkpoint naming the highest segment is written only after
		// the directory fsync that made that segment's entry durable
		// (at a rollover, and below), so the directory needs no sync.
		// Its own bytes may live only in the page cache (a rollover
		// whose checkpoint fsync failed, then a restart): a second fsync
		// need not write them, so it is written again and fsynced before
		// frames go to the segment it names (it is the only durable
		// record that the segment exists, see checkNothingMissing).
		s.ckptLen = ckFileLen
		return s.openCheckpoint(true)
	}
	// Every entry this store builds on (a segment created by a process
	// that died before syncing the directory) is made durable before the
	// checkpoint names it and before anything new is acknowledged.
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
	}
	s.ckptLen = max(ckFileLen, 0)
	return s.openCheckpoint(true)
}

func sortedNames(m map[string]uint64) []string { return slices.Sorted(maps.Keys(m)) }
