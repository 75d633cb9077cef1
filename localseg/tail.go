package localseg

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Segment sequence ranges. Each segment records the sequence of its first
// event when it is known: always after a replay, for segments this process
// created, and for the active segment after an O(1) open (its first frames
// are read). A sealed segment of an O(1) open is probed lazily by reading
// its frames up to its first event (sealed segments are immutable, so the
// answer is cached). Sequences are gapless, so a segment's last sequence is
// its successor's first minus one (the tip for the active segment), and a
// segment holding only consumer frames gets FirstSeq = LastSeq+1 = the
// next sequence.

// probeUnknownLocked makes the first sequence of every retained segment
// known. It releases s.mu while reading.
func (s *Store) probeUnknownLocked() error {
	type job struct {
		seg  *segment
		size int64
	}
	var jobs []job
	for _, seg := range s.segs {
		if !seg.known {
			jobs = append(jobs, job{seg, seg.size})
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	firsts := make([]uint64, len(jobs))
	errs := make([]error, len(jobs))
	s.mu.Unlock()
	for i, j := range jobs {
		r, err := s.readers.get(j.seg.id)
		if err != nil {
			errs[i] = fmt.Errorf("localseg: open segment %d: %w", j.seg.id, err)
			continue
		}
		firsts[i], errs[i] = probeFirstEvent(r.f, j.seg.id, j.size)
		s.readers.put(r)
		if errs[i] != nil && j.seg.sealed && errors.As(errs[i], new(*CorruptionError)) {
			// Damaged on the disk: its bucket copy tells (heal.go).
			if _, sum, ok := s.copyOf(j.seg.id, j.size, errs[i]); ok {
				firsts[i], errs[i] = 0, nil
				if sum.Events > 0 {
					firsts[i] = sum.FirstSeq
				}
			}
		}
	}
	s.mu.Lock()
	for i, j := range jobs {
		switch {
		case j.seg.id <= s.reclaimedSeg || j.seg.known:
			// Reclaimed, or learned by an index build, meanwhile.
		case errs[i] != nil:
			return errs[i]
		default:
			j.seg.first, j.seg.known = firsts[i], true
		}
	}
	return nil
}

// infosLocked describes the retained segments; their firsts are known.
func (s *Store) infosLocked() []SegmentInfo {
	infos := make([]SegmentInfo, len(s.segs))
	next := s.tip + 1
	for i := len(s.segs) - 1; i >= 0; i-- {
		seg := s.segs[i]
		info := SegmentInfo{ID: seg.id, Size: seg.size, Sealed: seg.sealed, FirstSeq: next}
		if seg.first != 0 {
			info.FirstSeq = seg.first
		}
		info.LastSeq = next - 1
		info.Events = int(info.LastSeq + 1 - info.FirstSeq)
		next = info.FirstSeq
		infos[i] = info
	}
	return infos
}

// sealedInfoLocked describes seg, the active segment being sealed.
func (s *Store) sealedInfoLocked(seg *segment) SegmentInfo {
	info := SegmentInfo{ID: seg.id, Size: seg.size, Sealed: true, FirstSeq: s.tip + 1, LastSeq: s.tip}
	if seg.first != 0 {
		info.FirstSeq = seg.first
		info.Events = int(s.tip + 1 - seg.first)
	}
	return info
}

// Snapshot returns a consistent view of the store for planning (reclaim,
// shipping). It does not build the read index.
func (s *Store) Snapshot() (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Snapshot{}, ErrClosed
	}
	if err := s.probeUnknownLocked(); err != nil {
		return Snapshot{}, err
	}
	return Snapshot{
		Tip:            s.tip,
		ReclaimedSeq:   s.reclaimedSeq,
		ReclaimedSeg:   s.reclaimedSeg,
		Consumers:      maps.Clone(s.cons),
		Deleted:        maps.Clone(s.deleted),
		Segments:       s.infosLocked(),
		TornTailBytes:  s.report.TornTailBytes,
		ActiveOpenedAt: s.activeSince,
		Jumps:          slices.Clone(s.jumps),
	}, nil
}

// TailExtent returns the durable frames after the frame of event afterSeq
// (from the first retained frame when afterSeq is below the base), in the
// segment holding event afterSeq+1: every frame covered by a completed
// fsync, ending with the last whole Event frame that fits in maxBytes (at
// least one). Consumer frames between events ride along; consumer frames
// after the last durable event wait. ok is false when no event after
// afterSeq is durable.
func (s *Store) TailExtent(afterSeq uint64, maxBytes int64) (Extent, bool, error) {
	if err := s.ensureIndex(); err != nil {
		return Extent{}, false, err
	}
	if err := s.resolveRun(max(afterSeq, 1)-1, 2); err != nil {
		return Extent{}, false, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Extent{}, false, ErrClosed
	}
	if afterSeq >= s.tip {
		s.mu.Unlock()
		return Extent{}, false, nil
	}
	firstSeq := max(afterSeq, s.reclaimedSeq) + 1
	first, err := s.locLocked(firstSeq)
	prevOff := int64(-1)
	if err == nil && afterSeq > s.reclaimedSeq {
		var prev loc
		if prev, err = s.locLocked(afterSeq); err == nil && prev.seg == first.seg {
			prevOff = prev.off
		}
	}
	s.mu.Unlock()
	if err != nil {
		return Extent{}, false, err
	}
	ext := Extent{Segment: first.seg, FirstSeq: firstSeq}
	if prevOff >= 0 {
		// Consumer frames between event afterSeq and the next ride along.
		if ext.Start, err = s.frameEnd(first.seg, prevOff, first.off); err != nil {
			return Extent{}, false, err
		}
	}

	// The last event of the segment whose frame starts within the budget
	// (candidate k), and the one before it, which surely fits.
	s.mu.Lock()
	seg := s.segByID(first.seg)
	i := sort.Search(len(s.idx.segs), func(i int) bool { return s.idx.segs[i].id >= first.seg })
	if seg == nil || i == len(s.idx.segs) || s.idx.segs[i].id != first.seg {
		s.mu.Unlock()
		return Extent{}, false, fmt.Errorf("%w: segment %d", ErrReclaimed, first.seg)
	}
	si := &s.idx.segs[i]
	ext.Sealed = seg.sealed
	size := seg.size
	i0 := int(firstSeq - si.first)
	budget := ext.Start + max(maxBytes, 1)
	j := sort.Search(si.n()-i0, func(j int) bool { return si.off(i0+j) >= budget })
	k := max(j, 1) - 1 // relative to firstSeq
	offK, offPrev := si.off(i0+k), int64(-1)
	if k > 0 {
		offPrev = si.off(i0 + k - 1)
	}
	s.mu.Unlock()

	end, err := s.frameEnd(first.seg, offK, size)
	if err != nil {
		return Extent{}, false, err
	}
	if end-ext.Start > maxBytes && k > 0 {
		k--
		if end, err = s.frameEnd(first.seg, offPrev, size); err != nil {
			return Extent{}, false, err
		}
	}
	ext.End, ext.LastSeq = end, firstSeq+uint64(k)
	return ext, true, nil
}

// frameEnd reads the header of the frame at off of segment id and returns
// where the frame ends, which must be at or before limit.
func (s *Store) frameEnd(id uint64, off, limit int64) (int64, error) {
	var hdr [HeaderSize]byte
	if err := s.readAt(id, hdr[:], off); err != nil {
		return 0, err
	}
	n := int64(le32(hdr[4:]))
	if le32(hdr[:]) != FrameMagic || n > MaxBodyLen || off+HeaderSize+n > limit {
		return 0, &CorruptionError{Segment: id, Offset: off, Err: fmt.Errorf("%w: frame header does not match the index", ErrCorrupt)}
	}
	return off + HeaderSize + n, nil
}

// ReadRange reads n bytes at off of a segment; the range must be durable.
func (s *Store) ReadRange(segment uint64, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("%w: range [%d,+%d)", ErrInvalidInput, off, n)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	seg := s.segByID(segment)
	var err error
	switch {
	case seg == nil && segment <= s.reclaimedSeg:
		err = fmt.Errorf("%w: segment %d", ErrReclaimed, segment)
	case seg == nil:
		err = fmt.Errorf("%w: no segment %d", ErrInvalidInput, segment)
	case off+n > seg.size:
		err = fmt.Errorf("%w: range [%d,%d) of segment %d is beyond its %d durable bytes", ErrInvalidInput, off, off+n, segment, seg.size)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if err := s.readAt(segment, buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadSegment reads a whole sealed segment (its logical bytes).
func (s *Store) ReadSegment(id uint64) ([]byte, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	seg := s.segByID(id)
	var err error
	switch {
	case seg == nil && id <= s.reclaimedSeg:
		err = fmt.Errorf("%w: segment %d", ErrReclaimed, id)
	case seg == nil:
		err = fmt.Errorf("%w: no segment %d", ErrInvalidInput, id)
	case !seg.sealed:
		err = fmt.Errorf("%w: segment %d is the active segment, not sealed", ErrInvalidState, id)
	}
	var size int64
	if seg != nil {
		size = seg.size
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if err := s.readAt(id, buf, 0); err != nil {
		return nil, err
	}
	return buf, nil
}
