package sim

// Local segment damaged at rest (issue 16, self-healing): a byte flipped in
// a sealed segment file on the disk, one whose bucket object is durable
// (it holds exactly the local bytes) and whose index file — the record the
// engine checks a copy against — is on the disk. The oracle expects
// healing: every per-step read of the open log answers byte for byte, as
// if nothing happened. One allowance keeps it honest: while bucket faults
// are on (a refused, delayed or damaged GET of the copy), the heal finds no
// verified copy and a read through the damaged frame fails as corruption
// naming that segment; that step is excused, and from then on until a ship
// pass ran with no fault on (the pass retries damaged segments) — the calm
// phase and the final checks stay strict. The same holds after an injected
// disk fault fired (it may have failed the heal's write of the replacement),
// and while the store is poisoned (it writes nothing until reopened). The segment's bucket object is
// never damaged at rest while its local file is (both copies damaged is a
// real loss the engine can only report), and the reverse.
//
// A limitation the simulation skips rather than checks: an open that finds
// a sealed segment damaged rebuilds its window of transaction ids only
// from the segments after it (localseg/txwindow.go); a heal at the start,
// or at a read before any append, rebuilds it in full, a later one does
// not. So after an open with a damaged local segment outstanding, retries
// (whose deduplication rests on that window) are not generated until the
// next open without one (windowHole).

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// opDamageLocal flips one byte of a durable sealed local segment.
func (r *run) opDamageLocal(ctx context.Context) *violation {
	if r.w.log == nil {
		return nil
	}
	snap, err := r.w.log.Store().Snapshot()
	if err != nil || len(snap.Segments) < 2 {
		return nil
	}
	dir := path.Clean("/" + filepath.Join(r.w.dir(), shard0))
	clean := r.w.clean()
	var cands []uint64
	for _, seg := range snap.Segments[:len(snap.Segments)-1] {
		key := blobtier.SegmentKey(0, seg.ID)
		if r.w.log.Store().IsEvicted(seg.ID) || r.damaged[key] != "" || r.localDamaged[seg.ID] != nil {
			continue
		}
		local, err := r.w.disk.ReadFile(path.Join(dir, localseg.SegmentFileName(seg.ID)))
		if err != nil || len(local) == 0 {
			continue
		}
		if digest, _, ok := localseg.SegmentRecord(r.w.disk, dir, seg.ID, int64(len(local))); !ok || digest != blobtier.Digest(local) {
			continue // no intact record to heal against
		}
		if obj, _, err := clean.Get(ctx, key); err == nil && bytes.Equal(obj, local) {
			cands = append(cands, seg.ID)
		}
	}
	if len(cands) == 0 {
		r.logf("damage local segment: none durable")
		return nil
	}
	id := cands[r.rng.IntN(len(cands))]
	name := path.Join(dir, localseg.SegmentFileName(id))
	data, _ := r.w.disk.ReadFile(name)
	at := r.rng.IntN(len(data))
	f, err := r.w.disk.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fail("sim", "open %s: %v", name, err)
	}
	_, err = f.WriteAt([]byte{data[at] ^ 0x10}, int64(at))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		return fail("sim", "damage %s: %v", name, err)
	}
	idx, _ := r.w.disk.ReadFile(path.Join(dir, localseg.SegmentIndexFileName(id)))
	r.localDamaged[id] = &localDamage{idx: idx}
	r.stats.Faults["at-rest:local-segment"]++
	r.logf("damage local segment %d at rest (byte %d of %d)", id, at, len(data))
	return nil
}

// localDamage is one local segment the simulation damaged.
type localDamage struct {
	excused bool   // a read failed on it with bucket faults on: excused until a clean ship pass
	idx     []byte // its index file when it was damaged
}

// localDamageExcused reports whether err, from the oracle's read of the
// open log, is corruption in a segment the simulation damaged locally
// while a heal could not be demanded (see the file comment).
func (r *run) localDamageExcused(err error) bool {
	var ce *localseg.CorruptionError
	if !errors.As(err, &ce) {
		return false
	}
	d := r.localDamaged[ce.Segment]
	poisoned := r.w.log != nil && r.w.log.Store().Poisoned() != nil // a poisoned store writes nothing, a heal included
	if d == nil || !(d.excused || poisoned || len(r.w.rules) > 0 || r.w.inj.takeFired()) {
		return false
	}
	d.excused = true
	r.stats.Faults["local-damage-unhealed-under-faults"]++
	r.logf("  (a read of locally damaged segment %d failed with bucket faults on: %v)", ce.Segment, err)
	return true
}

// noteLocalHealed, after a ship pass, forgets the damage the engine healed
// (the file is the bucket's bytes again) and ends the allowance of a pass
// run with no fault on.
func (r *run) noteLocalHealed(shipErr error) {
	if len(r.localDamaged) == 0 || r.w.log == nil {
		return
	}
	dir := path.Clean("/" + filepath.Join(r.w.dir(), shard0))
	clean := r.w.clean()
	for id, d := range r.localDamaged {
		local, lerr := r.w.disk.ReadFile(path.Join(dir, localseg.SegmentFileName(id)))
		obj, _, oerr := clean.Get(context.Background(), blobtier.SegmentKey(0, id))
		if lerr != nil || (oerr == nil && bytes.Equal(local, obj)) {
			// Healed, or reclaimed or evicted.
			if lerr == nil {
				r.stats.Steps["local-segment-healed"]++
			}
			delete(r.localDamaged, id)
			continue
		}
		if len(r.w.rules) == 0 && shipErr == nil {
			d.excused = false
		}
	}
}

// localCopyHeld reports whether key is a segment object whose local file
// the simulation damaged (opDamage then leaves it alone).
func (r *run) localCopyHeld(key string) bool {
	k, err := blobtier.ParseKey(key)
	return err == nil && k.Kind == blobtier.KindSegment && r.localDamaged[k.Segment] != nil
}

// localDamageUnrecoverable reports whether err, an open refused, may be
// due to a segment the simulation damaged locally whose index file — the
// engine's record to check a copy against, a cache written without fsync —
// a crash took or tore: then no copy can be proven to be that segment and the
// engine rightly refuses to heal it (the open fails on the damage, or the
// reconcile finds the disk and the bucket disagree). The run ends there
// (nothing can be required of it), counted.
func (r *run) localDamageUnrecoverable(err error) bool {
	if err == nil || len(r.localDamaged) == 0 {
		return false
	}
	dir := path.Clean("/" + filepath.Join(r.w.dir(), shard0))
	for id, d := range r.localDamaged {
		if idx, ierr := r.w.disk.ReadFile(path.Join(dir, localseg.SegmentIndexFileName(id))); ierr != nil || !bytes.Equal(idx, d.idx) {
			r.stats.Faults["local-damage-record-lost"]++
			r.logf("  (locally damaged segment %d lost its index file in a crash: no record to heal it against: %v)", id, err)
			return true
		}
	}
	return false
}

// excuseLocalDamage: an injected disk fault fired, perhaps on a heal's
// write of its replacement (the heal then fails and changes nothing): reads
// of the damaged segments are excused until a clean ship pass.
func (r *run) excuseLocalDamage() {
	for _, d := range r.localDamaged {
		d.excused = true
	}
}
