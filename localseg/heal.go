package localseg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Self-healing (issue 16): a sealed segment file found damaged at rest (a
// frame fails its CRC, or the replay finds it invalid) is replaced by its
// bucket copy when that copy verifies against the record made when the
// segment was sealed or validated: its index file (docs/FORMAT.md §3.6),
// whose own digest proves it intact, holds the segment's length and xxh64
// and its first event. The copy must have exactly that length and xxh64
// and pass every frame check with sequences from that first event; the
// Healer (the shipper) hands a copy over only when the segment is durable
// in the bucket and the object's epoch is on the writer's lineage. The
// replacement is written to a temporary name, fsynced, read back and
// checked again, and renamed over the damaged file under the writer role
// (then the directory is fsynced): a crash leaves the damaged file or the
// healed one, and a leftover temporary is swept by the next writable open.
//
// When no good copy exists (no index file to check against, not durable in
// the bucket, the bucket's copy damaged too, or the bucket failing) the
// segment is recorded as damaged: nothing is replaced, its index file
// alone indexes it (so every read that needs none of its damaged frames
// still answers), and the reads of its damaged frames fail as corruption.
// A damaged segment is tried again only by HealDamaged (the shipper's
// maintenance pass), never by every read.

// Healer supplies the bucket's copy of a sealed segment for healing.
// HealCopy returns the object's bytes only when the segment is durable in
// the bucket and the object's epoch is on the writer's lineage, and an
// error otherwise. It is called without any lock of the store's.
type Healer interface {
	HealCopy(ctx context.Context, id uint64) ([]byte, error)
}

// ErrNoGoodCopy reports a damaged sealed segment that could not be healed:
// no record to check a copy against, no durable copy in the bucket, or a
// copy that does not verify. Nothing was replaced.
var ErrNoGoodCopy = errors.New("localseg: no verified copy to heal a damaged segment from")

// healTimeout bounds one fetch of a bucket copy.
const healTimeout = 30 * time.Second

// healState is the store's damaged segments. Its mutex is a leaf, never
// held across I/O.
type healState struct {
	mu      sync.Mutex
	healer  Healer
	damaged map[uint64]string // segment id → why it could not be healed
	flight  map[uint64]chan struct{}
	// txPartial: the transaction window's rebuild at open stopped at this
	// damaged segment, with the tip at txTip (RefreshTxWindow).
	txPartial, txTip uint64

	healed, failures atomic.Int64
}

// SetHealer installs the source of bucket copies for self-healing (nil:
// none; damaged segments are then only reported).
func (s *Store) SetHealer(h Healer) {
	s.hl.mu.Lock()
	defer s.hl.mu.Unlock()
	s.hl.healer = h
}

// isDamaged reports whether segment id is recorded as damaged.
func (s *Store) isDamaged(id uint64) bool {
	s.hl.mu.Lock()
	defer s.hl.mu.Unlock()
	_, ok := s.hl.damaged[id]
	return ok
}

// DamagedSegment is a sealed segment found damaged at rest that could not
// be healed.
type DamagedSegment struct {
	ID     uint64 `json:"id"`
	Reason string `json:"reason"`
}

// Damaged lists the segments recorded as damaged, ascending.
func (s *Store) Damaged() []DamagedSegment {
	s.hl.mu.Lock()
	out := make([]DamagedSegment, 0, len(s.hl.damaged))
	for id, why := range s.hl.damaged {
		out = append(out, DamagedSegment{ID: id, Reason: why})
	}
	s.hl.mu.Unlock()
	slices.SortFunc(out, func(a, b DamagedSegment) int { return cmpU64(a.ID, b.ID) })
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// healAfter is called with a read's error: when it is corruption in a
// sealed segment not yet known as damaged, that segment is healed from the
// registered Healer. It reports whether the caller should read again (the
// segment was replaced, or found intact again).
func (s *Store) healAfter(err error) bool {
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment == 0 || s.isDamaged(ce.Segment) {
		return false
	}
	s.hl.mu.Lock()
	h := s.hl.healer
	s.hl.mu.Unlock()
	fetch := noCopy
	if h != nil {
		fetch = h.HealCopy
	}
	_, err = s.HealFrom(ce.Segment, fetch)
	return err == nil
}

// noCopy is the fetch of a store without a Healer (no bucket).
func noCopy(context.Context, uint64) ([]byte, error) {
	return nil, errors.New("the store has no bucket to heal from")
}

// HealDamaged tries every damaged segment again from the registered
// Healer (the shipper's maintenance pass) and returns how many it healed.
func (s *Store) HealDamaged() int {
	s.hl.mu.Lock()
	h := s.hl.healer
	s.hl.mu.Unlock()
	if h == nil {
		return 0
	}
	n := 0
	for _, d := range s.Damaged() {
		if healed, _ := s.HealFrom(d.ID, h.HealCopy); healed {
			n++
		}
	}
	return n
}

// HealFrom replaces sealed segment id, when its file is damaged, with the
// copy fetch returns, once that copy verifies against the segment's index
// file (length, xxh64, first event; every frame). It returns nil when the
// segment is intact now (healed reports a replacement), ErrNoGoodCopy (wrapped)
// when no copy verifies — the segment is then recorded as damaged and
// nothing is replaced — or the store's own error (closed, read-only,
// poisoned). One heal of a segment runs at a time.
func (s *Store) HealFrom(id uint64, fetch func(ctx context.Context, id uint64) ([]byte, error)) (healed bool, err error) {
	for {
		s.hl.mu.Lock()
		if s.hl.flight == nil {
			s.hl.flight = map[uint64]chan struct{}{}
		}
		if s.hl.damaged == nil {
			s.hl.damaged = map[uint64]string{}
		}
		c, busy := s.hl.flight[id]
		if !busy {
			c = make(chan struct{})
			s.hl.flight[id] = c
		}
		s.hl.mu.Unlock()
		if !busy {
			break
		}
		<-c
	}
	healed, err = s.heal(id, fetch)
	s.hl.mu.Lock()
	close(s.hl.flight[id])
	delete(s.hl.flight, id)
	switch {
	case err == nil:
		delete(s.hl.damaged, id)
	case errors.Is(err, ErrNoGoodCopy):
		s.hl.damaged[id] = err.Error()
	}
	s.hl.mu.Unlock()
	if healed && err == nil {
		if rerr := s.RefreshTxWindow(); rerr != nil {
			s.log.Warn("localseg: the transaction window could not be rebuilt after healing", "dir", s.dir, "segment", id, "err", rerr)
		}
	}
	if errors.Is(err, ErrNoGoodCopy) {
		s.hl.failures.Add(1)
		s.log.Error("localseg: a sealed segment is damaged on the local disk and no verified copy heals it; reads of its damaged frames fail", "dir", s.dir, "segment", id, "err", err)
	}
	return healed, err
}

// heal is HealFrom's work; every check comes before the rename. healed
// is false when the segment was found intact.
func (s *Store) heal(id uint64, fetch func(ctx context.Context, id uint64) ([]byte, error)) (healed bool, err error) {
	size, err := s.healTarget(id)
	if err != nil {
		return false, err
	}
	rec, intact, err := s.damagedRecord(id, size)
	if err != nil || intact {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), healTimeout)
	data, err := fetch(ctx, id)
	cancel()
	if err != nil {
		return false, fmt.Errorf("%w: segment %d: %w", ErrNoGoodCopy, id, err)
	}
	if err := rec.check(id, data); err != nil {
		return false, err
	}
	tmp := s.segPath(id) + ".heal" + tmpSuffix
	if err := s.writeHealTemp(tmp, id, data, rec); err != nil {
		_ = s.fs.Remove(tmp)
		return false, err
	}
	return true, s.renameHealed(id, size, tmp)
}

// CheckHealCopy reports whether data would heal sealed segment id: the
// file is damaged and data verifies against its record. It changes
// nothing (the shipper's start decides before it heals).
func (s *Store) CheckHealCopy(id uint64, data []byte) error {
	size, err := s.healTarget(id)
	if err != nil {
		return err
	}
	rec, intact, err := s.damagedRecord(id, size)
	if err == nil && intact {
		err = fmt.Errorf("%w: segment %d is intact on the local disk", ErrInvalidState, id)
	}
	if err != nil {
		return err
	}
	return rec.check(id, data)
}

// healTarget checks that segment id is a local sealed segment of a
// writable store and returns its length.
func (s *Store) healTarget(id uint64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return 0, err
	}
	seg := s.segByID(id)
	switch {
	case seg == nil || id <= s.reclaimedSeg:
		return 0, fmt.Errorf("%w: segment %d is not in the store", ErrInvalidInput, id)
	case !seg.sealed:
		return 0, fmt.Errorf("%w: segment %d is the active segment", ErrInvalidState, id)
	case s.IsEvicted(id):
		return 0, fmt.Errorf("%w: segment %d is evicted (its reads go to the bucket)", ErrInvalidState, id)
	}
	return seg.size, nil
}

// damagedRecord returns the record of sealed segment id (size bytes) when
// its file is damaged: its bytes differ from the record and fail the frame
// checks. intact reports a file that matches its record. A file whose
// frames are valid but differ from the record is no damage at rest (a
// diverged disk) and is refused, as is a segment without a record.
func (s *Store) damagedRecord(id uint64, size int64) (rec idxRecord, intact bool, err error) {
	rec, ok := readSegIdxRecord(s.fs, s.dir, id, size)
	if !ok {
		return rec, false, fmt.Errorf("%w: segment %d: its index file, the record of its length and xxh64, is missing or damaged", ErrNoGoodCopy, id)
	}
	local := make([]byte, size)
	if err := s.readAt(id, local, 0); err != nil {
		return rec, false, err
	}
	if xxhash.Sum64(local) == rec.digest {
		return rec, true, nil // a concurrent heal, or a read that failed on the way
	}
	if _, verr := VerifySegment(id, local, rec.first); verr == nil {
		return rec, false, fmt.Errorf("%w: segment %d differs from its record but every frame is valid: not damage at rest", ErrInvalidState, id)
	}
	return rec, false, nil
}

// idxRecord is what a segment's index file records of its bytes.
type idxRecord struct {
	size   int64
	digest uint64
	first  uint64 // the first event's sequence (0: none)
}

// readSegIdxRecord reads segment id's index file, valid for a segment of
// size bytes (its own digest checked; not its segment's).
func readSegIdxRecord(fsys FS, dir string, id uint64, size int64) (idxRecord, bool) {
	f, err := fsys.OpenFile(filepath.Join(dir, SegmentIndexFileName(id)), os.O_RDONLY, 0)
	if err != nil {
		return idxRecord{}, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() > maxSegIdxFile || st.Size() < segIdxHeader+8 {
		return idxRecord{}, false
	}
	raw := make([]byte, st.Size())
	if readFull(f, raw, 0) != nil {
		return idxRecord{}, false
	}
	p, digest, err := decodeSegIndex(raw, id, size)
	if err != nil {
		return idxRecord{}, false
	}
	rec := idxRecord{size: size, digest: digest}
	if p.n > 0 {
		rec.first = p.first
	}
	return rec, true
}

// check verifies a copy of segment id against the record: length, xxh64,
// then every frame with sequences from the recorded first event.
func (r idxRecord) check(id uint64, data []byte) error {
	if unsafeHealUnverified.Load() {
		return nil
	}
	if int64(len(data)) != r.size || xxhash.Sum64(data) != r.digest {
		return fmt.Errorf("%w: segment %d: the bucket's copy (%d bytes, xxh64 %016x) is not the sealed segment (%d bytes, xxh64 %016x)",
			ErrNoGoodCopy, id, len(data), xxhash.Sum64(data), r.size, r.digest)
	}
	sum, err := VerifySegment(id, data, r.first)
	if err != nil {
		return fmt.Errorf("%w: segment %d: the bucket's copy fails verification: %v", ErrNoGoodCopy, id, err)
	}
	if r.first != 0 && (sum.Events == 0 || sum.FirstSeq != r.first) {
		return fmt.Errorf("%w: segment %d: the bucket's copy starts at event %d, the record at %d", ErrNoGoodCopy, id, sum.FirstSeq, r.first)
	}
	return nil
}

// unsafeHealUnverified, set only by the RED control test, heals from a
// copy without checking it against the record.
var unsafeHealUnverified atomic.Bool

// writeHealTemp writes data to tmp, fsyncs it, and reads it back: what
// was written must still be the verified copy.
func (s *Store) writeHealTemp(tmp string, id uint64, data []byte, rec idxRecord) error {
	f, err := s.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("localseg: create %s: %w", tmp, err)
	}
	if _, err = f.WriteAt(data, 0); err != nil {
		err = fmt.Errorf("localseg: write %s: %w", tmp, err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("localseg: fsync %s: %w", tmp, err)
	}
	if err == nil {
		back := make([]byte, len(data))
		if rerr := readFull(f, back, 0); rerr != nil {
			err = fmt.Errorf("localseg: read back %s: %w", tmp, rerr)
		} else if cerr := rec.check(id, back); cerr != nil {
			err = fmt.Errorf("localseg: %s read back differs from the copy written: %w", tmp, cerr)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("localseg: close %s: %w", tmp, cerr)
	}
	return err
}

// renameHealed renames the verified temporary over segment id's file,
// holding the writer role (reclaim, eviction and seals wait), after
// checking the segment is still the sealed one of size bytes, local.
func (s *Store) renameHealed(id uint64, size int64, tmp string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquireWriterLocked()
	defer s.releaseWriterLocked()
	err := s.checkWritableLocked()
	if seg := s.segByID(id); err == nil && (seg == nil || !seg.sealed || seg.size != size || id <= s.reclaimedSeg || s.IsEvicted(id)) {
		err = fmt.Errorf("%w: segment %d changed while it was healed (reclaimed or evicted)", ErrInvalidState, id)
	}
	if err == nil {
		err = s.fs.Rename(tmp, s.segPath(id))
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
		return err
	}
	if derr := s.fs.SyncDir(s.dir); derr != nil {
		// The rename stands in this process; after a power cut the disk
		// may hold the damaged file again, which a read heals again.
		s.log.Warn("localseg: fsync of the directory after healing a segment failed", "dir", s.dir, "segment", id, "err", derr)
	}
	s.readers.drop(id)
	var ce *CorruptionError
	if errors.As(s.idxErr, &ce) && ce.Segment == id {
		s.idxErr = nil // the next read builds the index again
	}
	s.hl.healed.Add(1)
	s.log.Warn("localseg: healed a sealed segment damaged on the local disk from its verified bucket copy", "dir", s.dir, "segment", id, "bytes", size)
	return nil
}

// HealStats counts self-healing.
type HealStats struct {
	Healed   int64 // segments replaced by a verified bucket copy since the store opened
	Failures int64 // heals that found no verified copy
	Damaged  int   // segments damaged now, with no verified copy
}

// HealStats reports self-healing.
func (s *Store) HealStats() HealStats {
	s.hl.mu.Lock()
	n := len(s.hl.damaged)
	s.hl.mu.Unlock()
	return HealStats{Healed: s.hl.healed.Load(), Failures: s.hl.failures.Load(), Damaged: n}
}

// markDamaged records segment id as damaged.
func (s *Store) markDamaged(id uint64, why string) {
	s.hl.mu.Lock()
	defer s.hl.mu.Unlock()
	if s.hl.damaged == nil {
		s.hl.damaged = map[uint64]string{}
	}
	s.hl.damaged[id] = why
}

// SegmentRecord returns what segment id's index file in dir records of a
// segment of size bytes — its xxh64 and first event — when the file is
// intact (its own digest checks): the record a heal checks a copy against.
// For tools and the simulation.
func SegmentRecord(fsys FS, dir string, id uint64, size int64) (digest, first uint64, ok bool) {
	rec, ok := readSegIdxRecord(fsys, dir, id, size)
	return rec.digest, rec.first, ok
}

// DamagedOnDisk reports whether sealed segment id's file is damaged at
// rest: it fails the frame checks (with a record or without one).
func (s *Store) DamagedOnDisk(id uint64) bool {
	size, err := s.healTarget(id)
	if err != nil {
		return false
	}
	local := make([]byte, size)
	if err := s.readAt(id, local, 0); err != nil {
		return false
	}
	_, err = VerifySegment(id, local, 0)
	return err != nil
}
