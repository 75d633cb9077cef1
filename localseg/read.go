package localseg

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"sync"
)

// ensureIndexMode builds the read index if it is not built yet. After an O(1)
// open (trusted checkpoint) this is where the full replay runs, with every
// CRC and the gapless sequence checked, so a corrupt frame is an error at
// the first read. The replay reads without s.mu (appends continue); the
// frames that became durable meanwhile are read under s.mu at the end.
// Unless full, it leaves evicted segments without an index file pending
// (lazyindex.go).
func (s *Store) ensureIndexMode(full bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.closed:
			return ErrClosed
		case s.idx != nil && (!full || !s.idx.partial):
			return nil
		case s.idxErr != nil:
			return s.idxErr
		case s.idxBuilding || s.reclaiming:
			s.cond.Wait()
			continue
		}
		break
	}
	s.idxBuilding = true
	defer func() {
		s.idxBuilding = false
		s.cond.Broadcast()
	}()
	snap := make([]segRange, len(s.segs))
	for i, seg := range s.segs {
		snap[i] = segRange{id: seg.id, to: seg.size, sealed: seg.sealed}
	}
	ix := s.segIdxFiles()
	ix.lazy = !full
	r := &replay{tip: s.reclaimedSeq, cons: make(map[string]uint64), idx: newIndex(), imported: s.ev.imported()}
	firsts := make(map[uint64]uint64, len(snap))
	first := func(id, seq uint64) {
		if firsts[id] == 0 {
			firsts[id] = seq
		}
	}

	s.mu.Unlock()
	var ahead *idxReadAhead
	if full {
		// The index objects of evicted segments never held here, read
		// ahead of the replay rather than one round trip at a time.
		if ahead = s.prefetchIndexObjects(snap); ahead != nil {
			ix.fromObject = func(rg segRange) (*piece, []byte, bool) { return s.indexObjectPiece(rg, ahead.get) }
		}
	}
	// A damaged sealed segment is indexed from its verified bucket copy
	// (heal.go): reads far past it work, and reads of it find the damage.
	copies := map[uint64]memFile{}
	open := func(id uint64) (io.ReaderAt, func(), error) {
		if c, ok := copies[id]; ok {
			return c, func() {}, nil
		}
		return s.openReader(id)
	}
	err := r.replayRanges(open, ix, snap, first)
	sealedSize := func(id uint64) (int64, bool) {
		for _, rg := range snap {
			if rg.id == id {
				return rg.to, rg.sealed
			}
		}
		return 0, false
	}
	for err != nil && s.copyFor(err, copies, sealedSize) {
		r = &replay{tip: s.reclaimedSeq, cons: make(map[string]uint64), idx: newIndex(), imported: s.ev.imported()}
		clear(firsts)
		err = r.replayRanges(open, ix, snap, first)
	}
	if ahead != nil {
		ahead.wait()
	}
	s.mu.Lock()
	if err == nil {
		// Catch up with what became durable during the replay; s.mu
		// keeps it still now.
		var more []segRange
		for i, seg := range s.segs {
			rg := segRange{id: seg.id, to: seg.size}
			if i < len(snap) {
				rg.from = snap[i].to
			}
			if rg.to > rg.from {
				more = append(more, rg)
			}
		}
		err = r.replayRanges(s.openReader, nil, more, first)
	}
	// A pending segment's consumer frames (and, when no event follows it,
	// the tip) are unknown to this replay: the full one checks them.
	if err == nil && ((!r.unknown && r.tip != s.tip) || (!r.pended && !maps.Equal(r.cons, s.cons))) {
		err = fmt.Errorf("%w: the segments replay to tip %d and %d consumers, the checkpoint said tip %d and %d consumers (delete checkpoint.json to recover from the segments)",
			ErrCorrupt, r.tip, len(r.cons), s.tip, len(s.cons))
	}
	s.replayRuns.Add(1)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			s.idxErr = err
		}
		return err
	}
	for _, seg := range s.segs {
		if !seg.known || (seg.guess && full) { // a pending segment's first is still unknown
			seg.first, seg.known, seg.guess = firsts[seg.id], true, false
		}
	}
	s.idx = r.idx
	return nil
}

// openReader opens segment id through the reader cache (for
// replayRanges). It takes no lock of the store's.
func (s *Store) openReader(id uint64) (io.ReaderAt, func(), error) {
	r, err := s.readers.get(id)
	if err != nil {
		return nil, nil, err
	}
	return r.f, func() { s.readers.put(r) }, nil
}

// locLocked locates seq through the index, with the end of its segment.
func (s *Store) locLocked(seq uint64) (loc, error) {
	l, ok := s.idx.locate(seq)
	if !ok {
		return loc{}, fmt.Errorf("%w: sequence %d is not in the index", ErrCorrupt, seq)
	}
	if l.end < 0 {
		seg := s.segByID(l.seg)
		if seg == nil {
			return loc{}, fmt.Errorf("%w: segment %d of sequence %d", ErrReclaimed, l.seg, seq)
		}
		l.end = seg.size
	}
	return l, nil
}

// locateRunLocked locates the n sequences from first on, walking the
// index's segments in order.
func (s *Store) locateRunLocked(first, n uint64) ([]loc, error) {
	locs := getLocs(n)
	if n == 0 {
		return locs, nil
	}
	x := s.idx
	i := sort.Search(len(x.segs), func(i int) bool { return x.segs[i].first+uint64(x.segs[i].n()) > first })
	for seq := first; seq < first+n; i++ {
		if i >= len(x.segs) || seq < x.segs[i].first {
			return nil, fmt.Errorf("%w: sequence %d is not in the index", ErrCorrupt, seq)
		}
		si := &x.segs[i]
		seg := s.segByID(si.id)
		if seg == nil {
			return nil, fmt.Errorf("%w: segment %d of sequence %d", ErrReclaimed, si.id, seq)
		}
		k, cnt := int(seq-si.first), si.n()
		for ; k < cnt && seq < first+n; k, seq = k+1, seq+1 {
			l := loc{seq: seq, seg: si.id, off: si.off(k), end: seg.size, plain: si.plain}
			if k+1 < cnt {
				l.end = si.off(k + 1)
			}
			locs = append(locs, l)
		}
	}
	return locs, nil
}

// locPool recycles the location slices of scans (a page of 10k records
// needs 400 KiB of them).
var locPool sync.Pool

// getLocs returns an empty slice with room for n locations.
func getLocs(n uint64) []loc {
	if p, ok := locPool.Get().(*[]loc); ok && uint64(cap(*p)) >= n {
		return (*p)[:0]
	}
	return make([]loc, 0, n)
}

// putLocs gives back a slice of getLocs that nothing uses any more.
func putLocs(locs []loc) { locPool.Put(&locs) }

// Scan returns up to limit records after sequence after, in order. A
// cursor below the reclaim base is clamped to it (Clamped). RecordCount
// counts every record after the (clamped) cursor. An empty store answers
// Exists=false, not an error.
func (s *Store) Scan(after uint64, limit int) (Page, error) {
	if limit < 0 {
		return Page{}, fmt.Errorf("%w: negative limit %d", ErrInvalidInput, limit)
	}
	if err := s.ensureIndex(); err != nil {
		return Page{}, err
	}
	if err := s.resolveRun(after, uint64(limit)); err != nil {
		return Page{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Page{}, ErrClosed
	}
	p := Page{Exists: s.tip > 0, Base: s.reclaimedSeq + 1}
	from := after
	if after < s.reclaimedSeq {
		p.Clamped, from = true, s.reclaimedSeq
	}
	if s.tip > from {
		p.RecordCount = s.tip - from
	}
	locs, err := s.locateRunLocked(from+1, min(p.RecordCount, uint64(limit)))
	var hold pageHold
	var next *evictEntry
	if err == nil {
		hold, next = s.readAheadLocked(locs)
	}
	s.mu.Unlock()
	s.ev.readAhead(next)
	if err != nil {
		return Page{}, err
	}
	p.Records, err = s.readLocsHeld(locs, hold)
	putLocs(locs)
	if err != nil {
		return Page{}, err
	}
	return p, nil
}

// readAfter reads up to limit records after cursor (clamped to the base)
// and counts those in scope.
func (s *Store) readAfter(cursor uint64, limit int) ([]Record, uint64, error) {
	if err := s.ensureIndex(); err != nil {
		return nil, 0, err
	}
	if err := s.resolveRun(cursor, uint64(max(limit, 0))); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	from := max(cursor, s.reclaimedSeq)
	var count uint64
	if s.tip > from {
		count = s.tip - from
	}
	locs, err := s.locateRunLocked(from+1, min(count, uint64(limit)))
	var hold pageHold
	var next *evictEntry
	if err == nil {
		hold, next = s.readAheadLocked(locs)
	}
	s.mu.Unlock()
	s.ev.readAhead(next)
	if err != nil {
		return nil, 0, err
	}
	recs, err := s.readLocsHeld(locs, hold)
	putLocs(locs)
	return recs, count, err
}

// ReadExecution returns up to limit records of one execution after
// sequence after, in order, through the per-execution index (it never
// scans the log). An execution without retained events answers
// Exists=false.
func (s *Store) ReadExecution(executionID string, after uint64, limit int) (Page, error) {
	exec, err := validateName("execution_id", executionID)
	if err != nil {
		return Page{}, err
	}
	if limit < 0 {
		return Page{}, fmt.Errorf("%w: negative limit %d", ErrInvalidInput, limit)
	}
	if err := s.ensureIndexFull(); err != nil {
		return Page{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Page{}, ErrClosed
	}
	p := Page{Base: s.reclaimedSeq + 1}
	from := after
	if after < s.reclaimedSeq {
		p.Clamped, from = true, s.reclaimedSeq
	}
	l := s.idx.execs[exec]
	if l == nil {
		s.mu.Unlock()
		return p, nil
	}
	p.Exists = true
	seqs, count := l.after(from, limit)
	p.RecordCount = count
	locs := make([]loc, 0, len(seqs))
	for _, seq := range seqs {
		lc, err := s.locLocked(seq)
		if err != nil {
			s.mu.Unlock()
			return Page{}, err
		}
		locs = append(locs, lc)
	}
	s.mu.Unlock()
	if p.Records, err = s.readLocs(locs); err != nil {
		return Page{}, err
	}
	for i := range p.Records {
		// The per-execution lists come from replays or index files; a
		// wrong one must not hand out another execution's event.
		if got := p.Records[i].ExecutionID; got != exec {
			return Page{}, &CorruptionError{Segment: locs[i].seg, Offset: locs[i].off,
				Err: fmt.Errorf("%w: the index lists event %d under execution %q, its frame says %q", ErrCorrupt, locs[i].seq, exec, got)}
		}
	}
	return p, nil
}

// Get reads one event. A sequence at or below the reclaim base is
// ErrReclaimed (distinct from corruption); one above the tip, or 0, is
// ErrNotFound.
func (s *Store) Get(seq uint64) (Record, error) {
	check := func() error {
		switch {
		case s.closed:
			return ErrClosed
		case seq == 0 || seq > s.tip:
			return fmt.Errorf("%w: sequence %d (tip %d)", ErrNotFound, seq, s.tip)
		case seq <= s.reclaimedSeq:
			return fmt.Errorf("%w: sequence %d (reclaimed through %d)", ErrReclaimed, seq, s.reclaimedSeq)
		}
		return nil
	}
	s.mu.Lock()
	err := check()
	s.mu.Unlock()
	if err != nil {
		return Record{}, err
	}
	if err := s.ensureIndex(); err != nil {
		return Record{}, err
	}
	if err := s.resolveRun(seq-1, 1); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	var l loc
	if err = check(); err == nil {
		l, err = s.locLocked(seq)
	}
	s.mu.Unlock()
	if err != nil {
		return Record{}, err
	}
	recs, err := s.readLocs([]loc{l})
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}

// IndexBytes is the memory held by the read index (0 until it is built):
// the capacity of its slices and an estimate of its map's overhead.
func (s *Store) IndexBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idx == nil {
		return 0
	}
	return s.idx.bytes()
}
