package sim

// Self-healing from the bucket (issue 16) in the simulation: in eviction
// seeds (whose segment objects are never damaged at rest, evict.go) the
// damage-local op flips a byte in a local sealed segment the shard holds
// durable in the bucket, its object intact. The engine must replace it by
// its object at the first read that finds it or at the next start, so the
// acked-readable check needs no new allowance but one: while bucket
// faults are on, the heal's fetch may be refused (a storage error,
// ErrRemoteRead: remoteReadExcused) or damaged on the way (then the
// engine saw no good copy and answers the corruption, which is excused
// for the segments this op damaged only). The calm phase heals them all.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// opDamageLocal flips one byte of a local sealed segment that is durable
// in the bucket (its object equal to the local bytes).
func (r *run) opDamageLocal() *violation {
	if r.w.log == nil || r.w.evict == 0 {
		return nil
	}
	st := r.w.log.Store()
	snap, err := st.Snapshot()
	if err != nil {
		return nil
	}
	dir := filepath.Join(r.w.dir(), shard0)
	clean := r.w.clean()
	var cands []uint64
	for _, seg := range snap.Segments {
		if !seg.Sealed || seg.Events == 0 || st.IsEvicted(seg.ID) || !r.w.log.SegmentDurable(seg.ID) {
			continue
		}
		local, err := r.w.disk.ReadFile(filepath.Join(dir, localseg.SegmentFileName(seg.ID)))
		if err != nil {
			continue
		}
		if obj, _, err := clean.Get(simCtx(), blobtier.SegmentKey(0, seg.ID)); err == nil && bytes.Equal(obj, local) {
			cands = append(cands, seg.ID)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	id := cands[r.rng.IntN(len(cands))]
	f, err := r.w.disk.OpenFile(filepath.Join(dir, localseg.SegmentFileName(id)), os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil
	}
	off := int64(r.rng.IntN(int(fi.Size())))
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return nil
	}
	b[0] ^= 0x04
	if _, err := f.WriteAt(b[:], off); err != nil {
		return nil
	}
	_ = f.Sync() // damage that a power cut keeps
	r.localDamaged[id] = true
	r.stats.Faults["local-damage"]++
	r.logf("damage local segment %d at offset %d", id, off)
	return nil
}

// localDamageExcused reports whether err, from the oracle's read of the
// open log, is the corruption of a segment opDamageLocal damaged, answered
// while bucket faults were on (the heal found no good copy then).
func (r *run) localDamageExcused(err error) bool {
	var ce *localseg.CorruptionError
	if len(r.w.rules) == 0 || !errors.As(err, &ce) || !r.localDamaged[ce.Segment] {
		return false
	}
	r.stats.Faults["local-damage-unhealed-under-faults"]++
	r.logf("  (a read of locally damaged segment %d failed with bucket faults on: %v)", ce.Segment, err)
	return true
}

// localDamageStallsTail reports whether err, a ship pass's, is the local
// corruption of a segment opDamageLocal damaged, which the pass could not
// heal (seed 6013315: the heal's read of the object refused by a fault, a
// start whose listing hid the object): the tail cannot ship that segment's
// events from its damaged bytes, and until a heal or a start confirms its
// object the shipped position rightly stays below it. The faults on segment
// objects stall the tail here through the local damage, not through a
// failed upload (finding 4); the other checks (every acknowledged event
// readable, restores) still hold.
func (r *run) localDamageStallsTail(err error) bool {
	if len(r.localDamaged) == 0 || !errors.Is(err, localseg.ErrCorrupt) {
		return false
	}
	r.stats.Faults["local-damage-stalled-tail"]++
	r.logf("  (the tail stalls at a locally damaged segment its pass could not heal)")
	return true
}

// noteHealed counts the open log's heals so far (coverage).
func (r *run) noteHealed() {
	if r.w.log == nil || len(r.localDamaged) == 0 {
		return
	}
	if rs := r.w.log.Store().RemoteStats(); rs.Healed > 0 {
		r.stats.Steps["heal:healed"]++
	}
}
