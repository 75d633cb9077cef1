package localseg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Self-healing from the bucket (issue 16). A read that finds a frame of a
// local sealed segment corrupt (a flipped bit on the disk: the read index,
// or a page) replaces the segment by its bucket copy when that copy is the
// one sealed, and then reads on:
//
//   - the shipper holds the segment durable (SetHealCheck): its object was
//     read back equal to the local bytes while they were intact, under
//     this writer's lineage;
//   - the object, fetched (its own metadata checks the bytes on the way),
//     has the segment's length and, when the segment's index file (written
//     when it sealed, or when a replay validated every frame; never
//     fsynced, so a power cut may take it) records its xxh64, exactly
//     that xxh64; without one the shipper's durable record stands for it
//     (the object was read back equal to the bytes uploaded, which were
//     verified frame by frame first);
//   - every frame of the object verifies, from the segment's first event
//     (and every read of it checks that the index finds the event it
//     locates there).
//
// The replacement is an eviction (evict.go): evicted.json names the
// segment with that length and digest, durably, before the corrupt file is
// unlinked, so reads of it go to the bucket (each fetch verified against
// the digest again) and a crash at any point leaves either the corrupt
// file or the eviction. It is counted in RemoteStats (Healed, and among
// EvictedTotal) and logged. A segment that cannot be healed this way — no
// bucket, not durable there, an object missing or damaged (ErrNoCopy from
// the source), or a copy that differs — stays corrupt: its reads answer
// ErrCorrupt as before, and Unhealed names it (the shipper's readiness
// reports it) until a later read heals it. A bucket that fails the fetch
// is a storage error (ErrRemoteRead): the events exist in the bucket, and
// the next read tries again.

// ErrNoCopy marks a RemoteSource failure in which the bucket answered that
// it holds no good copy of the segment (the object is missing, or fails
// its own verification), as against a request that failed.
var ErrNoCopy = errors.New("localseg: the bucket holds no good copy of the segment")

// maxHealsPerRead bounds the segments one read replaces before it gives up.
const maxHealsPerRead = 4

type healState struct {
	mu      sync.Mutex // serializes heals
	durable atomic.Pointer[func(id uint64) bool]
	badMu   sync.Mutex        // a leaf: never held across a call out
	bad     map[uint64]string // segment → why it could not be healed; guarded by badMu
	healed  atomic.Int64
}

func (h *healState) setBad(id uint64, why string) {
	h.badMu.Lock()
	defer h.badMu.Unlock()
	if why == "" {
		delete(h.bad, id)
		return
	}
	if h.bad == nil {
		h.bad = map[uint64]string{}
	}
	h.bad[id] = why
}

// SetHealCheck enables healing: durable reports whether a sealed
// segment's bucket object is durable for this writer (nil disables it).
// It is called without any lock of the store's held.
func (s *Store) SetHealCheck(durable func(id uint64) bool) {
	if durable == nil {
		s.hl.durable.Store(nil)
		return
	}
	s.hl.durable.Store(&durable)
}

// Unhealed returns an error naming the local sealed segments found corrupt
// that no verified bucket copy replaced, or nil.
func (s *Store) Unhealed() error {
	s.hl.badMu.Lock()
	defer s.hl.badMu.Unlock()
	if len(s.hl.bad) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(s.hl.bad))
	return fmt.Errorf("%w: %d local sealed segment(s) are corrupt and the bucket holds no verified copy (segment %d: %s); reads of their events fail",
		ErrCorrupt, len(ids), ids[0], s.hl.bad[ids[0]])
}

// healing runs read, and after a failure on a corrupt local sealed segment
// heals it and runs read again.
func (s *Store) healing(read func() error) error {
	for n := 0; ; n++ {
		err := read()
		if err == nil || n == maxHealsPerRead {
			return err
		}
		if healed, herr := s.heal(err); !healed {
			return herr
		}
	}
}

// heal replaces the local sealed segment that cause (a read's error) names
// as corrupt by its bucket copy, when that copy is the one sealed. It
// reports whether it did; otherwise the error the read answers.
func (s *Store) heal(cause error) (bool, error) {
	var ce *CorruptionError
	if !errors.As(cause, &ce) {
		return false, cause
	}
	id := ce.Segment
	s.hl.mu.Lock()
	defer s.hl.mu.Unlock()
	s.mu.Lock()
	seg := s.segByID(id)
	var c evictCand
	local := seg != nil && seg.sealed && id > s.reclaimedSeg && !s.IsEvicted(id)
	if local {
		c = evictCand{id: id, first: seg.first, size: seg.size}
		if !seg.known {
			c.first = 0
		}
	}
	poison, readOnly := s.poison, s.readOnly
	s.mu.Unlock()
	if !local {
		return false, cause
	}
	bad := func(why string) (bool, error) {
		s.hl.setBad(id, why)
		s.log.Error("localseg: a corrupt sealed segment cannot be replaced from the bucket", "dir", s.dir, "segment", id, "why", why, "err", cause)
		return false, cause
	}
	durable := s.hl.durable.Load()
	switch {
	case s.ev.remote == nil || durable == nil:
		return bad("no bucket to heal it from")
	case readOnly:
		return bad("the store is open read-only")
	case !(*durable)(id):
		return bad("its bucket object is not durable")
	case poison != nil:
		// The eviction record cannot be written now; the reopen that a
		// poisoned store needs heals it at its start.
		s.hl.setBad(id, "the store is poisoned: reopen it")
		return false, fmt.Errorf("%w (segment %d is corrupt on the local disk and is replaced from the bucket once the store is reopened: %v)", poison, id, cause)
	}
	data, sum, _, err := s.sealedCopy(id, c.size, c.first)
	switch {
	case errors.Is(err, errNotSealed):
		return bad(err.Error())
	case errors.Is(err, ErrNoCopy):
		s.ev.failures.Add(1)
		return bad(err.Error())
	case err != nil:
		s.ev.failures.Add(1)
		return false, fmt.Errorf("%w: segment %d is corrupt on the local disk (%v), and reading its bucket copy failed: %v", ErrRemoteRead, id, cause, err)
	}
	c.digest = sum
	var res EvictResult
	if err := s.commitEvict([]evictCand{c}, &res); err != nil {
		return false, err
	}
	s.ev.fetches.Add(1)
	s.ev.fetchBytes.Add(int64(len(data)))
	s.ev.mu.Lock()
	s.ev.keepLocked(id, data)
	s.ev.mu.Unlock()
	s.mu.Lock()
	var ie *CorruptionError
	if errors.As(s.idxErr, &ie) && ie.Segment == id {
		s.idxErr = nil // the next read builds the index again, this segment from the bucket
	}
	if s.txStop == id && s.txns != nil {
		// The open's window stopped at this segment: without its ids a
		// retry of one of them would be written twice. Rebuilt holding
		// the writer role (appends queue; the evicted segment is read
		// from the cached copy).
		s.acquireWriterLocked()
		s.txStop = 0
		s.txns.reset()
		err := s.rebuildTxWindow()
		s.releaseWriterLocked()
		if err != nil {
			s.poisonLocked(err)
		}
	}
	s.mu.Unlock()
	s.hl.setBad(id, "")
	s.hl.healed.Add(1)
	s.log.Warn("localseg: a corrupt sealed segment was replaced by its verified bucket copy; its reads go to the bucket",
		"dir", s.dir, "segment", id, "bytes", c.size, "err", cause)
	return true, nil
}

// SealedCorrupt reports whether local sealed segment id of size bytes is
// damaged while an object of that size with digest may be it as it sealed:
// with an index file, the bytes no longer hash to the digest it recorded
// and digest is that one; without, the bytes fail verification. It only
// reads.
func (s *Store) SealedCorrupt(id uint64, size int64, digest uint64) (bool, error) {
	s.mu.Lock()
	seg := s.segByID(id)
	local := seg != nil && seg.sealed && seg.size == size && !s.IsEvicted(id)
	s.mu.Unlock()
	if !local {
		return false, nil
	}
	recorded, hasIdx := readSegIdxDigest(s.fs, s.dir, id, size)
	if hasIdx && recorded != digest {
		return false, nil
	}
	data, err := s.ReadSegment(id)
	if err != nil {
		return false, err
	}
	if hasIdx {
		return xxhash.Sum64(data) != digest, nil
	}
	// No recorded digest: only bytes that fail verification are corrupt
	// (valid frames that differ are another history, not damage).
	_, err = VerifySegment(id, data, 0)
	return errors.Is(err, ErrCorrupt), nil
}

// HealSegment replaces local sealed segment id, found corrupt
// (SealedCorrupt), by its bucket copy under the rules a read heals by.
func (s *Store) HealSegment(id uint64) error {
	cause := &CorruptionError{Segment: id, Err: fmt.Errorf("%w: its bytes no longer hash to the digest recorded when it sealed", ErrCorrupt)}
	if healed, err := s.heal(cause); !healed {
		return err
	}
	return nil
}

// errNotSealed marks a bucket copy that is not the segment as it sealed.
var errNotSealed = errors.New("the bucket's copy is not the sealed segment")

// sealedCopy fetches sealed segment id's object (its own metadata checks
// the bytes on the way) and checks that it is the segment as it sealed:
// size bytes, the xxh64 the segment's index file recorded when it has
// one, every frame valid from event first (0: whatever the first has).
// A copy that is not is errNotSealed; a failed fetch is the source's error
// (ErrNoCopy when the bucket holds no good copy).
func (s *Store) sealedCopy(id uint64, size int64, first uint64) ([]byte, uint64, SegmentSummary, error) {
	ctx, cancel := context.WithTimeout(s.ev.ctx, remoteTimeout)
	data, sum, err := s.ev.remote.FetchSegment(ctx, id)
	cancel()
	if err != nil {
		return nil, 0, SegmentSummary{}, err
	}
	recorded, hasIdx := readSegIdxDigest(s.fs, s.dir, id, size)
	if int64(len(data)) != size || hasIdx && sum != recorded {
		return nil, 0, SegmentSummary{}, fmt.Errorf("%w: %d bytes, xxh64 %016x, against %d bytes, recorded xxh64 %016x", errNotSealed, len(data), sum, size, recorded)
	}
	summary, err := VerifySegment(id, data, first)
	if err != nil {
		return nil, 0, SegmentSummary{}, fmt.Errorf("%w: it fails verification: %v", errNotSealed, err)
	}
	return data, sum, summary, nil
}

// copyFor, in a replay (an open's, or the read index's build) that failed
// with err, reads the sealed segment err names as damaged (its size by
// sizeOf, false when it is no sealed segment) from the bucket into copies
// for the replay to read instead (copyOf). The replay then checks that its
// events continue the sequence. It reports whether to replay again.
func (s *Store) copyFor(err error, copies map[uint64]memFile, sizeOf func(id uint64) (int64, bool)) bool {
	var ce *CorruptionError
	if !errors.As(err, &ce) || copies[ce.Segment] != nil || len(copies) >= maxHealsPerRead || s.IsEvicted(ce.Segment) {
		return false
	}
	size, ok := sizeOf(ce.Segment)
	if !ok {
		return false
	}
	data, _, ok := s.copyOf(ce.Segment, size, err)
	if ok {
		copies[ce.Segment] = memFile(data)
	}
	return ok
}

// copyOf reads sealed segment id of size bytes, found damaged on the local
// disk (cause), from the bucket for an open to read instead (the full
// replay's, the read index's build, the probe of its first event, the
// transaction window's rebuild): only its sealed copy (sealedCopy).
// Nothing changes for it: the local file stays damaged, and the shipper's
// start replaces it once it holds the object durable (a read would, too).
func (s *Store) copyOf(id uint64, size int64, cause error) ([]byte, SegmentSummary, bool) {
	if s.ev.remote == nil {
		return nil, SegmentSummary{}, false
	}
	data, _, summary, err := s.sealedCopy(id, size, 0)
	if err != nil {
		s.log.Error("localseg: a damaged sealed segment has no verified bucket copy to read instead", "dir", s.dir, "segment", id, "err", cause, "copy_err", err)
		return nil, SegmentSummary{}, false
	}
	s.log.Warn("localseg: a sealed segment is damaged on the local disk; the open reads its bucket copy (the start replaces the file)", "dir", s.dir, "segment", id, "err", cause)
	return data, summary, true
}
