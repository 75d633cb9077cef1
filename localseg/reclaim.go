package localseg

import (
	"fmt"
	"slices"
)

// Reclaim removes sealed segments through throughSegment in the crash-safe
// order of docs/FORMAT.md §8.2, holding the writer role (appends wait) throughout:
//
//  1. write forward every live consumer's state into the active segment
//     (an Ack at its cursor, or a ConsumerCreate when it never acked) and
//     fsync it, because the frames that created those cursors may live in
//     the segments about to go;
//  2. commit reclaim.json {reclaimed_through_seq, reclaimed_through_segment}
//     (temporary file, fsync, rename, directory fsync): the point of no
//     return;
//  3. unlink the segments and fsync the directory;
//  4. drop them from the read index (the base offset moves up).
//
// A crash before step 2 reclaims nothing; after it, the next open deletes
// the leftovers without reading them. An unsealed target (the active
// segment or beyond) or a target below an earlier reclaim is refused with
// ErrInvalidState; the current target again is a no-op. The caller decides
// what may go (consumer interest, retention, the bucket); the store only
// executes.
func (s *Store) Reclaim(throughSegment uint64) (res ReclaimResult, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return ReclaimResult{}, err
	}
	s.acquireWriterLocked()
	defer func() {
		if ferr := s.finishWriterLocked(); err == nil && ferr != nil {
			res, err = ReclaimResult{}, ferr
		}
	}()
	for s.idxBuilding {
		s.cond.Wait()
	}
	s.reclaiming = true
	defer func() { s.reclaiming = false }()
	if err := s.checkWritableLocked(); err != nil {
		return ReclaimResult{}, err
	}
	switch {
	case throughSegment < s.reclaimedSeg:
		return ReclaimResult{}, fmt.Errorf("%w: reclaim through segment %d is below the earlier reclaim through %d", ErrInvalidState, throughSegment, s.reclaimedSeg)
	case throughSegment == s.reclaimedSeg:
		return ReclaimResult{ThroughSeq: s.reclaimedSeq, ThroughSegment: s.reclaimedSeg}, nil
	case throughSegment >= s.active().id:
		return ReclaimResult{}, fmt.Errorf("%w: segment %d is not sealed (the active segment is %d)", ErrInvalidState, throughSegment, s.active().id)
	}
	if err := s.flushLocked(); err != nil {
		return ReclaimResult{}, s.poison
	}
	if err := s.probeUnknownLocked(); err != nil {
		return ReclaimResult{}, err
	}
	infos := s.infosLocked()
	k, held := s.segIndexOf(throughSegment)
	if !held {
		return ReclaimResult{}, fmt.Errorf("%w: segment %d is not retained (a segment-id jump skips it)", ErrInvalidState, throughSegment)
	}
	k++ // segments that go
	if k < len(s.segs) && s.segs[k].guess {
		// Its first event, hence the last one reclaimed, is not known
		// (lazyindex.go): a read of it, or a reclaim through it, first.
		return ReclaimResult{}, fmt.Errorf("%w: the first event of evicted segment %d, after segment %d, is not known yet (a lazy hydrate recorded it unread): reclaim through a later segment, or read it first", ErrInvalidState, s.segs[k].id, throughSegment)
	}
	res = ReclaimResult{ThroughSeq: infos[k-1].LastSeq, ThroughSegment: throughSegment}

	// 1. Write forward, after whatever is queued (whose effects the head
	// state already holds).
	names := make([]string, 0, len(s.headCons))
	for name := range s.headCons {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if c := s.headCons[name].cursor; c > 0 {
			s.enqueueConsumerLocked(KindAck, name, c)
		} else {
			s.enqueueConsumerLocked(KindConsumerCreate, name, 0)
		}
	}
	if err := s.flushLocked(); err != nil {
		return ReclaimResult{}, s.poison
	}

	// 2. The manifest.
	s.mu.Unlock()
	err = WriteReclaimManifest(s.fs, s.dir, ReclaimManifest{ReclaimedThroughSeq: res.ThroughSeq, ReclaimedThroughSegment: throughSegment})
	s.mu.Lock()
	if err != nil {
		s.poisonLocked(err)
		return ReclaimResult{}, s.poison
	}

	// 3. Unlink. A failure leaves a leftover the next open deletes.
	gone := s.segs[:k]
	s.mu.Unlock()
	for _, seg := range gone {
		// The index file first: one left without its segment would be
		// an orphan (the next open removes those below the manifest).
		if err := removeSegIndex(s.fs, s.dir, seg.id); err != nil {
			s.log.Warn("localseg: unlink of a reclaimed segment's index file failed; the next open deletes it", "dir", s.dir, "segment", seg.id, "err", err)
		}
		if s.IsEvicted(seg.id) {
			res.Removed = append(res.Removed, seg.id) // its file left with the eviction
			continue
		}
		if err := s.fs.Remove(s.segPath(seg.id)); err != nil {
			s.log.Warn("localseg: unlink of a reclaimed segment failed; the next open deletes it", "dir", s.dir, "segment", seg.id, "err", err)
			continue
		}
		res.Removed = append(res.Removed, seg.id)
		res.Bytes += seg.size
	}
	if len(res.Removed) > 0 {
		if err := s.fs.SyncDir(s.dir); err != nil {
			s.log.Warn("localseg: fsync of the directory after reclaim failed", "dir", s.dir, "err", err)
		}
	}
	s.mu.Lock()

	// 4. The new base.
	s.segs = append([]*segment(nil), s.segs[k:]...)
	s.reclaimedSeq, s.reclaimedSeg = res.ThroughSeq, throughSegment
	s.txns.dropThrough(res.ThroughSeq) // the window is the newest events above the base
	if s.idx != nil {
		s.idx.trim(throughSegment, res.ThroughSeq)
	}
	for _, seg := range gone {
		s.readers.drop(seg.id)
	}
	s.ev.forgetThrough(throughSegment)
	s.log.Info("localseg: reclaimed segments", "dir", s.dir, "through_segment", throughSegment, "through_seq", res.ThroughSeq, "bytes", res.Bytes)
	return res, nil
}
