package localseg

import (
	"errors"
	"fmt"
)

// The read paths' half of self-healing (heal.go): index builds, reads and
// recovery's replay heal a damaged sealed segment and run again, or let
// its intact index file stand in for it.

// maxHealRetries bounds how often one read heals and reads again.
const maxHealRetries = 3

// ensureIndexHealing builds the read index (ensureIndexMode). Corruption in a
// sealed segment is healed and the build run again; a segment that stays
// damaged is indexed from its index file when that is intact, so reads that
// need none of its damaged frames answer.
func (s *Store) ensureIndexHealing(full bool) error {
	for try := 0; ; try++ {
		err := s.ensureIndexMode(full)
		if err == nil || try >= maxHealRetries || !(s.healAfter(err) || s.degradeIndex(err)) {
			return err
		}
	}
}

// degradeIndex lets the index be built around a segment recorded as
// damaged whose index file is intact: it clears the build's error when
// that names the segment. It reports whether the build should run again.
func (s *Store) degradeIndex(err error) bool {
	var ce *CorruptionError
	if !errors.As(err, &ce) || !s.isDamaged(ce.Segment) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seg := s.segByID(ce.Segment)
	if seg == nil || !seg.sealed {
		return false
	}
	if _, ok := readSegIdxRecord(s.fs, s.dir, ce.Segment, seg.size); !ok {
		return false
	}
	var cur *CorruptionError
	if errors.As(s.idxErr, &cur) && cur.Segment == ce.Segment {
		s.idxErr = nil
	}
	return true
}

// readLocs reads the events at locs (readLocsOnce); corruption in a sealed
// segment is healed and the read run again.
func (s *Store) readLocs(locs []loc) ([]Record, error) {
	recs, err := s.readLocsOnce(locs)
	for try := 0; err != nil && try < maxHealRetries && s.healAfter(err); try++ {
		recs, err = s.readLocsOnce(locs)
	}
	return recs, err
}

// replaySealedRecovering is recovery's replay of the sealed segments
// (recover.go): a sealed segment found damaged whose index file is intact
// is recorded as damaged and the replay runs again from r's initial state
// (the reclaim base, no consumers, an empty index) with the index file
// standing in for it, so the open goes on; the shipper heals the segment at
// start, or it is reported.
func (s *Store) replaySealedRecovering(r *replay, open openSegFunc, rgs []segRange, first func(id, seq uint64)) error {
	sizes := make(map[uint64]int64, len(rgs))
	for _, rg := range rgs {
		sizes[rg.id] = rg.to
	}
	for try := 0; ; try++ {
		err := r.replayRanges(open, s.segIdxFiles(), rgs, first)
		var ce *CorruptionError
		if err == nil || try >= maxHealRetries || !errors.As(err, &ce) || s.isDamaged(ce.Segment) {
			return err
		}
		size, sealed := sizes[ce.Segment]
		if !sealed {
			return err
		}
		if _, ok := readSegIdxRecord(s.fs, s.dir, ce.Segment, size); !ok {
			return err
		}
		s.markDamaged(ce.Segment, fmt.Sprintf("found damaged at open (%v); not healed yet", err))
		s.log.Warn("localseg: a sealed segment is damaged on the disk; its index file stands in for it until it is healed", "dir", s.dir, "segment", ce.Segment, "err", err)
		*r = replay{tip: s.reclaimedSeq, cons: make(map[string]uint64), idx: newIndex(), imported: r.imported}
	}
}

// firstOfDamaged answers a probe of sealed segment id's first event that
// failed with err: when err is corruption and the segment's index file is
// intact, the segment is recorded as damaged and the file's first event is
// the answer; otherwise err stands.
func (s *Store) firstOfDamaged(id uint64, size int64, err error) (uint64, error) {
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != id {
		return 0, err
	}
	rec, ok := readSegIdxRecord(s.fs, s.dir, id, size)
	if !ok {
		return 0, err
	}
	if !s.isDamaged(id) {
		s.markDamaged(id, fmt.Sprintf("found damaged (%v); not healed yet", err))
		s.log.Warn("localseg: a sealed segment is damaged on the disk; its index file stands in for it until it is healed", "dir", s.dir, "segment", id, "err", err)
	}
	return rec.first, nil
}

// noteTxPartial records that the transaction window's rebuild at open
// stopped at damaged segment id, at the store's tip then.
func (s *Store) noteTxPartial(id uint64) {
	s.hl.mu.Lock()
	defer s.hl.mu.Unlock()
	s.hl.txPartial, s.hl.txTip = id, s.tip
	s.hl.txHole.Store(true)
}

// RefreshTxWindow rebuilds the transaction window in full when its rebuild
// at open stopped at a damaged segment that has been healed since (the
// shipper's start, or the first read after the open healed it; HealFrom
// calls it). It reads the durable frames, so it waits for no group in
// flight: with one, the next append the hole refuses runs it (healtx.go).
// Until it ran, an append whose transaction id the window does not hold is
// refused (ErrTxWindowIncomplete): it could be a retry of an event in the
// damaged segment.
func (s *Store) RefreshTxWindow() error {
	s.hl.mu.Lock()
	id := s.hl.txPartial
	_, still := s.hl.damaged[id]
	s.hl.mu.Unlock()
	if id == 0 || still {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.txns == nil || s.closed {
		return nil
	}
	if s.writing || s.flight != nil || len(s.pend.items) > 0 {
		s.hl.txRefreshDue.Store(true) // the window holds ids not durable yet
		return nil
	}
	if sum, _, err := hashSegment(s.openReader, segRange{id: id, to: s.segSize(id), sealed: true}, nil); err != nil {
		return nil
	} else if rec, ok := readSegIdxRecord(s.fs, s.dir, id, s.segSize(id)); !ok || rec.digest != sum {
		return nil // not healed
	}
	old := s.txns
	// The same seeds: an append hashes its event before it takes s.mu.
	s.txns = &txWindow{max: old.max, seedA: old.seedA, seedB: old.seedB, seedC: old.seedC}
	s.hl.mu.Lock()
	s.hl.txPartial = 0
	s.hl.txHole.Store(false)
	s.hl.mu.Unlock()
	if err := s.rebuildTxWindow(); err != nil {
		s.txns = old
		s.noteTxPartial(id)
		return err
	}
	s.log.Info("localseg: transaction window rebuilt in full after healing a damaged segment", "dir", s.dir, "segment", id)
	return nil
}

// segSize is segment id's length (0 when it is not in the store).
func (s *Store) segSize(id uint64) int64 {
	if seg := s.segByID(id); seg != nil {
		return seg.size
	}
	return 0
}
