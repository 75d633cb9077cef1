package sim

import (
	"context"
	"errors"
	"path"
	"path/filepath"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// watermarkUnreadable reports whether the watermark object now at rest
// fails verification or does not decode, whatever damaged it: a fault at
// rest (which watermarkDamaged tracks) or a damaging write fault on its
// put (a compare-and-swap that reported success and landed damaged bytes).
// The two leave the same bucket. A damaged watermark stops every restore
// and hydrate until its owner rewrites it (watermark.Repair, at Open and
// in GC): the contract asks the owner to repair it, not a restore to guess
// the reclaim base from the objects that are left (a missing segment just
// above the mark would then look reclaimed). So a restore refused on it
// mid-run, or a disk lost while it is damaged, is excused exactly as for
// damage at rest; the final strict restore, after the owner's GC had its
// chance to repair, is not.
func (r *run) watermarkUnreadable(ctx context.Context) bool {
	data, _, err := r.w.clean().Get(ctx, blobtier.WatermarkKey(0))
	if err != nil {
		return errors.Is(err, blobtier.ErrCorrupt)
	}
	_, err = watermark.Decode(data)
	return err != nil
}

// unreadableData lists the segment and tail objects now at rest that fail
// verification, whatever damaged them (at rest, or a damaging write fault
// on their put).
func (r *run) unreadableData(ctx context.Context) []blobtier.Key {
	var out []blobtier.Key
	clean := r.w.clean()
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for _, key := range r.w.raw.Keys(blobtier.ListPrefix(0, kind)) {
			k, err := blobtier.ParseKey(key)
			if err != nil {
				continue
			}
			if _, _, err := clean.Get(ctx, key); errors.Is(err, blobtier.ErrCorrupt) {
				out = append(out, k)
			}
		}
	}
	return out
}

// damagingWriteActive reports whether a fault that damages the bytes of a
// put (truncate, extend, corrupt) on segment or tail objects is still in
// force.
func (r *run) damagingWriteActive() bool {
	for id := range r.w.rules {
		rule := r.ruleOf[id]
		switch rule.Kind {
		case faultbucket.Truncate, faultbucket.Extend, faultbucket.Corrupt:
		default:
			continue
		}
		if rule.Op == faultbucket.OpWrite && (rule.Key == "*" || rule.Key == "noetl.ehdb.seg.*" || rule.Key == "noetl.ehdb.tail.*") {
			return true
		}
	}
	return false
}

// writeDamageExcusesRestore: a restore may refuse a bucket holding a data
// object that fails verification (a corrupt object is a hard error naming
// its key, never a silently shortened replay), and while a fault still
// damages the owner's puts its repair (read back, put again) cannot be
// demanded: the same bucket as damage at rest, which damageOutstanding
// excuses. Once the faults stop the owner must repair it (the final strict
// restore and the directed damaged put of finding 2 stay checked: their
// rules are gone by then).
func (r *run) writeDamageExcusesRestore(ctx context.Context) bool {
	return r.damagingWriteActive() && len(r.unreadableData(ctx)) > 0
}

// lostWithUnshippedDamage: the disk is lost while a tail object that fails
// verification holds an event above everything the engine reported the
// bucket to hold (shipped or confirmed synchronously). Its only intact
// copy was on the lost disk; a hydrate refuses the damaged object (a
// corrupt object is an error, never a silently shortened replay, and a new
// owner writing those sequences again would meet the object under their
// key), so the run cannot recover, exactly as with damage at rest. A
// damaged tail object wholly at or below that floor is no excuse: those
// events were promised.
func (r *run) lostWithUnshippedDamage(ctx context.Context) bool {
	for _, k := range r.unreadableData(ctx) {
		if k.Kind == blobtier.KindTail && k.LastSeq > r.m.floor() {
			return true
		}
	}
	return false
}

// lostWithDamagedSegment: the disk is lost while a segment object above
// the watermark fails verification because its own put landed damaged
// bytes (a damaging write fault), and faults kept its owner from deleting
// it and putting it again before the disk went (seeds 105044, 1002582: a
// refused delete or stat, then refused puts). The bucket is then exactly
// as with damage at rest, which adopt already counts unrecoverable
// (damageOutstanding): a hydrate refuses a corrupt segment object, never
// bridging it with tail objects (coldload doc.go: only damaged tail
// objects are passed over), and no owner is left that holds its bytes.
// Demanding a hydrate there was wrong; a segment object put intact, or
// one reclaimed below the mark, excuses nothing.
func (r *run) lostWithDamagedSegment(ctx context.Context) bool {
	var mark watermark.Mark
	if data, _, err := r.w.clean().Get(ctx, blobtier.WatermarkKey(0)); err == nil {
		if m, err := watermark.Decode(data); err == nil {
			mark = m
		}
	}
	for _, k := range r.unreadableData(ctx) {
		if k.Kind == blobtier.KindSegment && k.Segment > mark.Segment {
			return true
		}
	}
	return false
}

// adoptedMark returns, when the shard directory's reclaim manifest names
// the segment of the bucket's watermark at rest, a test of one diffFiles
// change being part of that adoption: the manifest written, or a segment
// file at or below the mark's segment removed. An Open that failed on a
// bucket request after its verdict may have adopted the mark already
// (shipper reconcile: the checks first, then Reclaim, then the cursor
// object's rebuild, whose compare-and-swap can fail; seed 108763: a lost
// ack on it). That is the local half of a GC pass the bucket committed,
// no decision about the disk: the refusals that must change nothing
// (finding 1) are still checked, as is any other change (nil: none).
func (r *run) adoptedMark(ctx context.Context) func(string) bool {
	data, _, err := r.w.clean().Get(ctx, blobtier.WatermarkKey(0))
	if err != nil {
		return nil
	}
	mark, err := watermark.Decode(data)
	if err != nil || mark.Segment == 0 {
		return nil
	}
	m, err := localseg.ReadReclaimManifest(r.w.disk, filepath.Join(r.w.dir(), shard0))
	if err != nil || m.ReclaimedThroughSegment != mark.Segment {
		return nil
	}
	return func(c string) bool {
		base := path.Base(c[1:])
		if c[0] != '-' {
			// The manifest: a store file that is no segment, index or
			// checkpoint (its name is localseg's to spell).
			return localseg.IsStoreFile(base) && !localseg.IsSegmentFile(base) && !localseg.IsIndexFile(base) && !localseg.IsCheckpointFile(base)
		}
		for id := uint64(1); id <= mark.Segment; id++ {
			if base == localseg.SegmentFileName(id) {
				return true
			}
		}
		return false
	}
}

// requestFailed reports whether an injected fault of kind k fails the
// request it hits: refused, or a write that landed while its answer was
// lost (lost_ack). Either way an Open that fails on it failed on a bucket
// request, not on a decision about the disk: it is no refusal (stale,
// diverged, second writer, foreign bucket: the paths issue 12 finding 1
// names), and a retry makes the same crash repair first (see reopen). A
// lost_ack on the cursor object's rebuild fails Open after the verdict
// exactly as a refused one does (seed 4906).
func requestFailed(k faultbucket.Kind) bool {
	return k == faultbucket.Refuse || k == faultbucket.LostAck
}

// newLineage: the disk now in use does not continue the history of the
// copies saved before (a hydrated disk, or an older copy accepted).
func (r *run) newLineage() {
	r.lineages++
	r.lineage = r.lineages
}

// forkedCopy runs when the older copy pick was accepted, before its log is
// checked. A copy saved on another lineage (before a disk loss and its
// hydrate, or before another older copy was accepted) does not hold a
// prefix of the history the model served since: above what the bucket was
// reported to hold (shipped or confirmed synchronously), the current
// disk's events were its loss window, and the older copy may hold other
// events under those sequences (seed 6622: the hydrated disk's unshipped
// sequence 23, then the pre-loss copy's own 23). The engine cannot tell
// (nothing of them reached the bucket), and the contract promises only
// what the bucket holds across a disk that is replaced, as across one
// that is lost (forgetAbove). At or below that floor the history stays
// checked, and a copy of the same lineage is checked in full.
func (r *run) forkedCopy(pick int) {
	if r.savedLine[pick] != r.lineage {
		r.logf("  (a copy from another lineage: the history above %d is the replaced disk's loss window)", r.m.floor())
		r.m.forgetAbove(r.m.floor())
	}
	r.newLineage()
}
