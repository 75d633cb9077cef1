package localseg

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// EvictResult reports one eviction pass.
type EvictResult struct {
	Evicted []uint64 `json:"evicted"` // segment ids that left the disk
	Bytes   int64    `json:"bytes"`
	// LocalSealed is the bytes of the sealed segments still on disk after
	// the pass; Overshoot how far that is above the budget (segments not
	// yet durable in the bucket stay, so the budget is a target).
	LocalSealed int64 `json:"local_sealed_bytes"`
	Overshoot   int64 `json:"overshoot_bytes"`
}

// evictCand is a segment a pass may evict.
type evictCand struct {
	id, first uint64
	size      int64
	digest    uint64
}

// unsafeEvictAny, set only by a RED control test, evicts without asking
// whether the bucket holds the segment: the loss the rule exists to forbid.
var unsafeEvictAny atomic.Bool

// Evict moves the oldest sealed segments off the disk while the sealed
// segments on disk hold more than budget bytes, each only when durable(id)
// says its bucket copy is durable (verified, read back), and stops at the
// first one that is not (the contiguous durable rule: an older segment is
// never skipped). The active segment never goes. For each segment, in this
// order: its bytes are hashed and its index file made valid (it stays on
// disk, so per-execution reads fetch only segments holding the execution);
// then, holding the writer role, evicted.json naming it (length, xxh64,
// first event) is committed durably — the point of no return — and only
// then is the file unlinked and the directory fsynced. A crash before the
// commit evicts nothing; after it the next open sweeps the file (it is in
// the bucket, and reads of it go there). A budget below 0 evicts nothing.
// durable is called without any lock of the store's.
func (s *Store) Evict(budget int64, durable func(id uint64) bool) (EvictResult, error) {
	var res EvictResult
	s.mu.Lock()
	if err := s.checkWritableLocked(); err != nil {
		s.mu.Unlock()
		return res, err
	}
	if err := s.probeUnknownLocked(); err != nil {
		s.mu.Unlock()
		return res, err
	}
	var local []evictCand
	var total int64
	for _, seg := range s.segs {
		if !seg.sealed {
			break
		}
		if _, ok := s.ev.get(seg.id); ok {
			continue
		}
		local = append(local, evictCand{id: seg.id, first: seg.first, size: seg.size})
		total += seg.size
	}
	s.mu.Unlock()
	res.LocalSealed = total
	if budget < 0 {
		return res, nil
	}
	var cands []evictCand
	for _, c := range local {
		if total <= budget || !(unsafeEvictAny.Load() || durable(c.id)) {
			break
		}
		var err error
		if c.digest, err = s.prepareEvict(c); err != nil {
			s.log.Error("localseg: a sealed segment cannot be evicted", "dir", s.dir, "segment", c.id, "err", err)
			break
		}
		cands = append(cands, c)
		total -= c.size
	}
	if len(cands) == 0 {
		res.Overshoot = max(res.LocalSealed-budget, 0)
		return res, nil
	}
	err := s.commitEvict(cands, &res)
	res.LocalSealed = s.RemoteStats().LocalSealed
	res.Overshoot = max(res.LocalSealed-budget, 0)
	return res, err
}

// prepareEvict hashes segment c and makes sure its index file is valid for
// those bytes (writing it when it is missing or stale). Sealed bytes never
// change, so this runs without the writer role.
func (s *Store) prepareEvict(c evictCand) (uint64, error) {
	rg := segRange{id: c.id, to: c.size, sealed: true}
	sum, _, err := hashSegment(s.openReader, rg, nil)
	if err != nil {
		return 0, fmt.Errorf("localseg: read segment %d: %w", c.id, err)
	}
	if digest, ok := readSegIdxDigest(s.fs, s.dir, c.id, c.size); ok && digest == sum {
		return sum, nil
	}
	h := xxhash.New()
	p, _ := scanRange(s.openReader, rg, nil, h)
	if p.err != nil {
		return 0, p.err
	}
	digest := h.Sum64()
	if digest != sum {
		return 0, fmt.Errorf("%w: segment %d changed while it was read", ErrCorrupt, c.id)
	}
	if err := writeSegIndex(s.fs, s.dir, c.id, encodeSegIndex(p, c.size, digest)); err != nil {
		return 0, fmt.Errorf("localseg: write the index file of segment %d: %w", c.id, err)
	}
	return digest, nil
}

// commitEvict records cands in evicted.json and unlinks their files,
// holding the writer role (reclaim and seal wait; appends queue).
func (s *Store) commitEvict(cands []evictCand, res *EvictResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return err
	}
	s.acquireWriterLocked()
	defer s.releaseWriterLocked()
	if err := s.checkWritableLocked(); err != nil {
		return err
	}
	// A reclaim may have run since the plan, and a heal (heal.go) may
	// have evicted a candidate.
	cands = slices.DeleteFunc(cands, func(c evictCand) bool {
		_, gone := s.ev.get(c.id)
		return gone || c.id <= s.reclaimedSeg || s.segByID(c.id) == nil
	})
	if len(cands) == 0 {
		return nil
	}
	entries := s.ev.list(s.reclaimedSeg)
	for _, c := range cands {
		entries = append(entries, newEvictEntry(c.id, c.size, c.digest, c.first))
	}
	sortEntries(entries)
	s.mu.Unlock()
	err := writeDurably(s.fs, s.dir, evictedName, encodeEvictRecord(entries))
	s.mu.Lock()
	if err != nil {
		// As for reclaim.json: after a failed fsync nothing later may
		// build on the record's durability.
		s.poisonLocked(err)
		return s.poison
	}
	s.ev.setEntries(entries) // reads go to the bucket from here on
	s.mu.Unlock()
	for _, c := range cands {
		if err := s.fs.Remove(s.segPath(c.id)); err != nil {
			s.log.Warn("localseg: unlink of an evicted segment failed; the next open deletes it", "dir", s.dir, "segment", c.id, "err", err)
			continue
		}
		res.Evicted = append(res.Evicted, c.id)
		res.Bytes += c.size
	}
	if len(res.Evicted) > 0 {
		if err := s.fs.SyncDir(s.dir); err != nil {
			s.log.Warn("localseg: fsync of the directory after eviction failed", "dir", s.dir, "err", err)
		}
	}
	s.mu.Lock()
	for _, c := range cands {
		s.readers.drop(c.id)
	}
	s.ev.evicted.Add(int64(len(cands)))
	s.log.Info("localseg: evicted segments durable in the bucket", "dir", s.dir, "segments", res.Evicted, "bytes", res.Bytes)
	return nil
}

// IsEvicted reports whether segment id left the disk (its reads go to the
// bucket).
func (s *Store) IsEvicted(id uint64) bool {
	_, ok := s.ev.get(id)
	return ok
}

// EvictedSegment returns the length and xxh64 an evicted segment had when
// it left the disk (its bucket copy must match them).
func (s *Store) EvictedSegment(id uint64) (size int64, digest uint64, ok bool) {
	en, ok := s.ev.get(id)
	return en.Size, en.digest, ok
}

func sortEntries(es []evictEntry) {
	slices.SortFunc(es, func(a, b evictEntry) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// readSegIdxDigest returns the segment digest segment id's index file
// records, when the file is valid for a segment of that size.
func readSegIdxDigest(fsys FS, dir string, id uint64, size int64) (uint64, bool) {
	f, err := fsys.OpenFile(filepath.Join(dir, SegmentIndexFileName(id)), os.O_RDONLY, 0)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() > maxSegIdxFile || st.Size() < segIdxHeader+8 {
		return 0, false
	}
	raw := make([]byte, st.Size())
	if readFull(f, raw, 0) != nil {
		return 0, false
	}
	_, digest, err := decodeSegIndex(raw, id, size)
	return digest, err == nil
}
