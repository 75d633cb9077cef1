package localseg

import "fmt"

// Pages bounded by bytes (additive: Scan and ReadExecution return whole
// pages as before). An HTTP answer must not grow with ?limit= over large
// events, so these stop a page before its records' frames pass a byte
// budget, deciding from the index alone before a byte of a record is read.

// cutLocs keeps the longest prefix of locs whose frames (the span each
// location covers: its frame, and any consumer frames up to the next event)
// fit in maxBytes, and always the first one. cut is true when locations
// were left out. maxBytes <= 0 is no budget.
func cutLocs(locs []loc, maxBytes int64) (kept []loc, cut bool) {
	if maxBytes <= 0 {
		return locs, false
	}
	var total int64
	for i := range locs {
		total += locs[i].end - locs[i].off
		if i > 0 && total > maxBytes {
			return locs[:i], true
		}
	}
	return locs, false
}

// ScanBytes is Scan whose page also stops before its records' frames pass
// maxBytes (their on-disk bytes: payload and identifiers plus a few dozen
// bytes of framing each). The first record in scope is always returned,
// however large. cut reports that records within limit were left out; the
// next page starts after the last record returned.
func (s *Store) ScanBytes(after uint64, limit int, maxBytes int64) (p Page, cut bool, err error) {
	if limit < 0 {
		return Page{}, false, fmt.Errorf("%w: negative limit %d", ErrInvalidInput, limit)
	}
	if err := s.ensureIndex(); err != nil {
		return Page{}, false, err
	}
	if err := s.resolveRun(after, uint64(limit)); err != nil {
		return Page{}, false, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Page{}, false, ErrClosed
	}
	p = Page{Exists: s.tip > 0, Base: s.reclaimedSeq + 1}
	from := after
	if after < s.reclaimedSeq {
		p.Clamped, from = true, s.reclaimedSeq
	}
	if s.tip > from {
		p.RecordCount = s.tip - from
	}
	locs, err := s.locateRunLocked(from+1, min(p.RecordCount, uint64(limit)))
	kept, cut := cutLocs(locs, maxBytes)
	var hold pageHold
	var next *evictEntry
	if err == nil {
		hold, next = s.readAheadLocked(kept)
	}
	s.mu.Unlock()
	s.ev.readAhead(next)
	if err != nil {
		return Page{}, false, err
	}
	p.Records, err = s.readLocsHeld(kept, hold)
	putLocs(locs)
	if err != nil {
		return Page{}, false, err
	}
	return p, cut, nil
}

// ReadExecutionBytes is ReadExecution whose page also stops before its
// records' frames pass maxBytes, as ScanBytes.
func (s *Store) ReadExecutionBytes(executionID string, after uint64, limit int, maxBytes int64) (p Page, cut bool, err error) {
	exec, err := validateName("execution_id", executionID)
	if err != nil {
		return Page{}, false, err
	}
	if limit < 0 {
		return Page{}, false, fmt.Errorf("%w: negative limit %d", ErrInvalidInput, limit)
	}
	if err := s.ensureIndexFull(); err != nil {
		return Page{}, false, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Page{}, false, ErrClosed
	}
	p = Page{Base: s.reclaimedSeq + 1}
	from := after
	if after < s.reclaimedSeq {
		p.Clamped, from = true, s.reclaimedSeq
	}
	l := s.idx.execs[exec]
	if l == nil {
		s.mu.Unlock()
		return p, false, nil
	}
	p.Exists = true
	seqs, count := l.after(from, limit)
	p.RecordCount = count
	locs := make([]loc, 0, len(seqs))
	for _, seq := range seqs {
		lc, err := s.locLocked(seq)
		if err != nil {
			s.mu.Unlock()
			return Page{}, false, err
		}
		locs = append(locs, lc)
	}
	s.mu.Unlock()
	locs, cut = cutLocs(locs, maxBytes)
	if p.Records, err = s.readLocs(locs); err != nil {
		return Page{}, false, err
	}
	for i := range p.Records {
		if got := p.Records[i].ExecutionID; got != exec {
			return Page{}, false, &CorruptionError{Segment: locs[i].seg, Offset: locs[i].off,
				Err: fmt.Errorf("%w: the index lists event %d under execution %q, its frame says %q", ErrCorrupt, locs[i].seq, exec, got)}
		}
	}
	return p, cut, nil
}
