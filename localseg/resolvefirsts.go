package localseg

import (
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"
)

// resolveFetches bounds the segments an owner's open fetches at once to
// learn their first events (memory: that many segments beside the cache).
const resolveFetches = 8

// An owner's open of a lazily hydrated store (Options.ResolveFirsts).
//
// A lazy hydrate records the older segments as evicted, with the first
// event their heads gave it, or, when they did not, with the first event
// not known (FirstUnknown): the store reports those empty until a
// read resolves them (lazyindex.go). A reader copes; an owner does not:
// its start (the cursor object's shipped_through, the bucket's watermark)
// and GC read every segment's event range from the snapshot, and an
// unknown range there reads as none (the simulation found shipped_through
// rebuilt from 60 to 0, and an open refused as diverged). So a writable
// open asked to resolve them fetches each such segment once, verified as
// every remote read is (length, xxh64, every frame: remote.go), or its index
// object when that describes exactly the recorded bytes (indexobj.go),
// learns its first event and records it in evicted.json (committed like the store's
// own record), before recovery changes a byte; when the bucket cannot
// serve one, the open is refused with ErrRemoteRead and the directory is
// left as it was. The record it writes then reads like one of the store's
// own evictions: later opens fetch nothing for it.

// resolveUnknownFirsts records the first event of every segment evicted.json
// names with FirstUnknown (above the reclaim base), or fails changing
// nothing. The firsts it learns must fit the record: ascending, each
// resolved segment ending before the next recorded first.
func (s *Store) resolveUnknownFirsts() error {
	entries, err := readEvictRecord(s.fs, s.dir)
	if err != nil {
		return err
	}
	// The fetches run resolveFetches at a time (fetch is safe for
	// concurrent use and verifies each copy); the record changes only
	// after every one of them has passed.
	type result struct {
		first, last uint64
		events      bool
	}
	results := make([]result, len(entries))
	var g errgroup.Group
	g.SetLimit(resolveFetches)
	resolved := 0
	for i, en := range entries {
		if en.ID <= s.reclaimedSeg || en.First != FirstUnknown {
			continue
		}
		resolved++
		g.Go(func() error {
			// The segment's index object, when it describes exactly the
			// recorded bytes (indexobj.go), gives the range without the
			// segment.
			if p, raw, ok := s.indexObjectPiece(segRange{id: en.ID, to: en.Size, sealed: true}, s.fetchIndexObject); ok {
				results[i] = result{first: p.first, last: p.first + uint64(p.n) - 1, events: p.n > 0}
				_ = writeSegIndex(s.fs, s.dir, en.ID, raw) // a cache (§3.6): the replay loads it
				return nil
			}
			data, err := s.ev.fetch(en)
			if err != nil {
				return fmt.Errorf("localseg: the owner's open must know the events of segment %d (a lazy hydrate left it in the bucket): %w", en.ID, err)
			}
			sum, err := VerifySegment(en.ID, data, 0)
			if err != nil {
				return fmt.Errorf("%w: segment %d: the bucket's copy fails verification: %v", ErrRemoteRead, en.ID, err)
			}
			results[i] = result{first: sum.FirstSeq, last: sum.LastSeq, events: sum.Events > 0}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	last := map[uint64]uint64{} // resolved id → its last event
	for i, en := range entries {
		if en.ID <= s.reclaimedSeg || en.First != FirstUnknown {
			continue
		}
		entries[i].First = 0 // it holds no event
		if r := results[i]; r.events {
			entries[i].First, last[en.ID] = r.first, r.last
		}
	}
	if resolved == 0 {
		return nil
	}
	if err := s.checkResolvedFirsts(entries, last); err != nil {
		return err
	}
	if err := writeDurably(s.fs, s.dir, evictedName, encodeEvictRecord(entries)); err != nil {
		return err
	}
	s.ev.setEntries(slices.DeleteFunc(entries, func(e evictEntry) bool { return e.ID <= s.reclaimedSeg }))
	return nil
}

// checkResolvedFirsts refuses firsts that do not fit: above the reclaim
// base, ascending, and each resolved segment's last event below the next
// recorded first.
func (s *Store) checkResolvedFirsts(entries []evictEntry, last map[uint64]uint64) error {
	prevEnd, prevID := s.reclaimedSeq, uint64(0) // the highest event so far
	for _, e := range entries {
		if e.ID <= s.reclaimedSeg || e.First == 0 {
			continue
		}
		if e.First <= prevEnd {
			return fmt.Errorf("%w: segment %d starts at event %d, segment %d (or the reclaim base) reaches %d", ErrCorrupt, e.ID, e.First, prevID, prevEnd)
		}
		prevEnd, prevID = e.First, e.ID
		if l, ok := last[e.ID]; ok {
			prevEnd = l
		}
	}
	return nil
}
