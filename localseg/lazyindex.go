package localseg

import (
	"fmt"
	"slices"
	"sort"
)

// The read index of evicted segments is built lazily, per segment.
//
// An evicted segment whose index file is missing or not trusted (a lazy
// hydrate imports segments no disk here ever held: ImportEvicted) is not
// fetched by the first index build: it is left pending (index.pending),
// and none of its events is located until a read needs one. A read by
// sequence (Scan, a pull, Get, the tail extent) resolves the pending
// segments its range may lie in first (resolveRun): each is fetched and
// verified as every remote read is (remote.go), scanned, its index file
// written when the store is writable, and its locations join the index.
// Which pending segment holds a sequence is not known before it is read
// (the record may not hold its first event), so the resolution reads the
// lowest pending segment above the indexed one that ends right before the
// sequence, and otherwise bisects the pending segments between the two
// indexed neighbours: a read deep into the evicted history fetches
// O(log n) segments beside the ones it reads. The per-execution lists
// need every event, so a per-execution read first builds the index in
// full (ensureIndexFull), fetching every pending segment once; the index
// files it writes make later builds fetch none.
//
// A resolved segment must fit between its indexed neighbours (its first
// event above the previous one's last, its last below the next one's
// first); anything else is corruption, as the full replay would report.

// ensureIndex builds the read index, leaving evicted segments without an
// index file pending: they are read when a read of their sequences resolves
// them (resolveRun).
func (s *Store) ensureIndex() error {
	return s.healing(func() error { return s.ensureIndexMode(false) })
}

// ensureIndexFull is ensureIndex with no segment left pending: the
// per-execution lists are complete.
func (s *Store) ensureIndexFull() error {
	return s.healing(func() error { return s.ensureIndexMode(true) })
}

// resolveRun makes the index locate every event in (after, after+limit]
// that lies above the reclaim base and at or below the tip.
func (s *Store) resolveRun(after, limit uint64) error {
	s.mu.Lock()
	if s.idx == nil || len(s.idx.pending) == 0 {
		s.mu.Unlock()
		return nil
	}
	from := max(after, s.reclaimedSeq) + 1
	end := s.tip
	if limit < end-min(end, from-1) {
		end = from - 1 + limit
	}
	s.mu.Unlock()
	for seq := from; seq <= end; {
		s.mu.Lock()
		x := s.idx
		if x == nil {
			s.mu.Unlock()
			return nil
		}
		id, next, fetch := x.pendingFor(seq, s.reclaimedSeq)
		s.mu.Unlock()
		if !fetch {
			if next <= seq {
				return nil // not in the index: the locate reports it
			}
			seq = next
			continue
		}
		if err := s.resolveSegment(x, id); err != nil {
			return err
		}
	}
	return nil
}

// pendingFor says how to locate seq: next, the sequence after the indexed
// segment holding it (fetch false), or id, the pending segment to read
// first (fetch true). next is 0 when seq is neither indexed nor possibly
// in a pending segment.
func (x *index) pendingFor(seq, base uint64) (id, next uint64, fetch bool) {
	i := sort.Search(len(x.segs), func(i int) bool { return x.segs[i].first+uint64(x.segs[i].n()) > seq })
	if i < len(x.segs) && x.segs[i].first <= seq {
		return 0, x.segs[i].first + uint64(x.segs[i].n()), false
	}
	var lo, hi uint64 = 0, ^uint64(0)
	if i > 0 {
		lo = x.segs[i-1].id
	}
	if i < len(x.segs) {
		hi = x.segs[i].id
	}
	a, _ := slices.BinarySearch(x.pending, lo+1)
	b, _ := slices.BinarySearch(x.pending, hi)
	if a >= b {
		return 0, 0, false
	}
	prevEnd := base + 1
	if i > 0 {
		prevEnd = x.segs[i-1].first + uint64(x.segs[i-1].n())
	}
	if prevEnd == seq {
		return x.pending[a], 0, true // the walk continues from its neighbour
	}
	return x.pending[a+(b-a)/2], 0, true
}

// resolveSegment reads pending segment id and adds its locations to x,
// when x is still the store's index and id still pending in it.
func (s *Store) resolveSegment(x *index, id uint64) error {
	en, ok := s.ev.get(id)
	if !ok {
		// No longer evicted (reclaimed): drop it from the pending.
		s.mu.Lock()
		x.dropPending(id)
		s.mu.Unlock()
		return nil
	}
	p, _ := s.segIdxFiles().scan(s.openReader, segRange{id: id, to: en.Size, sealed: true}, nil)
	if p.err != nil {
		return p.err
	}
	s.resolved.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idx != x || !slices.Contains(x.pending, id) {
		return nil
	}
	x.dropPending(id)
	if seg := s.segByID(id); seg != nil && seg.guess {
		seg.guess = false // its first event is known now (none when p.n is 0)
		if p.n > 0 {
			seg.first = p.first
		}
	}
	if p.n == 0 {
		return nil
	}
	k := sort.Search(len(x.segs), func(i int) bool { return x.segs[i].id > id })
	last := p.first + uint64(p.n) - 1
	if k > 0 && x.segs[k-1].first+uint64(x.segs[k-1].n()) > p.first || k < len(x.segs) && x.segs[k].first <= last {
		return &CorruptionError{Segment: id, Offset: p.firstOff, Err: fmt.Errorf("%w: events %d..%d overlap an indexed neighbour", ErrCorrupt, p.first, last)}
	}
	si := p.offs
	si.first = p.first
	si.trim()
	x.segs = slices.Insert(x.segs, k, si)
	x.events += uint64(p.n)
	return nil
}

func (x *index) dropPending(id uint64) {
	if i, ok := slices.BinarySearch(x.pending, id); ok {
		x.pending = slices.Delete(x.pending, i, i+1)
	}
}

// PendingSegments reports how many evicted segments the read index has not
// read yet (lazyindex.go), and how many it read on demand since the open.
func (s *Store) PendingSegments() (pending int, resolved int64) {
	s.mu.Lock()
	if s.idx != nil {
		pending = len(s.idx.pending)
	}
	s.mu.Unlock()
	return pending, s.resolved.Load()
}
