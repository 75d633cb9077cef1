package sim

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// opDamagedPut is issue 12 finding 2's ground, directed: a segment put
// that lands damaged bytes (under our metadata), a read-back that fails
// (so the uploader cannot see the damage and delete the object), then the
// process is killed (no last shipment) and restarts with the disk kept.
// At start, durable means read back intact: the owner must find the
// object damaged, delete it and put it again, so that after the next
// successful ship pass a restore holds everything (with the finding
// reverted the segment counts as durable on its metadata alone, tail
// cleanup deletes its good tail copies and the restore fails).
//
// The bucket is calm otherwise (heal), so that the restore must succeed:
// the damaged object is not at rest damage the run may excuse.
func (r *run) opDamagedPut(ctx context.Context) *violation {
	if r.known[2] || r.w.log == nil {
		return nil
	}
	r.heal()
	put := r.w.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Corrupt, Key: "noetl.ehdb.seg.*", Times: 1})
	get := r.w.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: "noetl.ehdb.seg.*", Times: 1})
	r.stats.Faults["damaged-put"]++
	r.logf("fault damaged segment put, failed read-back")
	for range 2 {
		if v := r.opBatch(ctx); v != nil {
			return v
		}
		if r.w.log == nil {
			return nil
		}
	}
	if v := r.opShip(ctx, true); v != nil {
		return v
	}
	fired := r.w.fb.Fired(put) > 0 && r.w.fb.Fired(get) > 0
	r.w.fb.Remove(put)
	r.w.fb.Remove(get)
	r.logf("  (damaged put and failed read-back fired: %v)", fired)
	r.w.crash(false, 0) // killed: no last shipment
	r.stats.Restarts["crash-after-damaged-put"]++
	r.logf("kill")
	if v, err := r.reopen(ctx, "after a damaged put"); v != nil || err != nil {
		return v
	}
	for range 2 {
		if v := r.opShip(ctx, false); v != nil || r.w.log == nil {
			return v
		}
	}
	return r.opRestore(ctx, false)
}

// refusedKeepsWatermark checks, after an Open refused as a stale or
// diverged disk, that the watermark object is as it was before the Open
// (before holds its bytes then): a damaged watermark is repaired only once
// the start-up checks passed (issue 12 finding 7), so a stale disk's lower
// base never rewrites it.
func (r *run) refusedKeepsWatermark(before []byte, had, damaged bool, err error) *violation {
	if r.known[7] {
		return nil
	}
	switch errClass(err) {
	case "err=stale_disk", "err=diverged":
	default:
		return nil
	}
	after, ok := r.w.raw.Raw(blobtier.WatermarkKey(0))
	if ok != had || !bytes.Equal(after, before) {
		return fail("refused-open-changed-watermark", "an Open refused (%v) rewrote the watermark object (damaged before: %v)", err, damaged)
	}
	return nil
}

// noteMustRepair runs at a restart with the disk kept, after the old Log
// closed (segs: its segments): a segment object damaged at rest whose
// events a tail object in the bucket still holds (or that the cursor
// object's shipped_through does not reach yet) has not been read back
// intact since its damage, and nothing but its good tail copies holds
// those events in the bucket. At start, durable means read back intact
// (issue 12 finding 2): the new owner must find it damaged and put it
// again, before tail cleanup deletes the good copies. checkRepaired holds
// it to that after its first successful ship pass. (A segment read back
// intact whose tail copies are gone is not read again at every start:
// Open stays O(1) in the log's length, finding 14; its damage at rest
// stays excused.)
func (r *run) noteMustRepair(ctx context.Context, segs map[uint64][2]uint64, reclaimedSeg uint64) {
	if r.known[2] {
		return
	}
	clean := r.w.clean()
	data, _, err := clean.Get(ctx, blobtier.WatermarkKey(0))
	if err != nil && !errors.Is(err, blobtier.ErrNotFound) {
		return
	}
	var wm watermark.Mark
	if err == nil {
		if wm, err = watermark.Decode(data); err != nil {
			return
		}
	}
	var shipped uint64
	if data, _, err := clean.Get(ctx, blobtier.CursorKey(0)); err == nil {
		if c, err := tailbatch.DecodeCursor(data); err == nil {
			shipped = c.ShippedThrough
		}
	}
	var tails []blobtier.Key
	for _, key := range r.w.raw.Keys(blobtier.ListPrefix(0, blobtier.KindTail)) {
		if k, err := blobtier.ParseKey(key); err == nil && r.lineageKeeps(ctx, clean, key, k) {
			tails = append(tails, k)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(r.damaged)) {
		k, err := blobtier.ParseKey(key)
		rng, ok := segs[k.Segment]
		if err != nil || k.Kind != blobtier.KindSegment || !ok || k.Segment <= max(wm.Segment, reclaimedSeg) {
			continue
		}
		if cur, ok := r.w.raw.Raw(key); !ok || string(cur) != r.damaged[key] {
			continue
		}
		covered := rng[1] > shipped
		for _, t := range tails {
			covered = covered || t.FirstSeq <= rng[1] && t.LastSeq >= rng[0]
		}
		if covered {
			r.mustRepair[key] = r.w.opens
			r.logf("  (segment %d is damaged at rest and its tail copies are in the bucket: the next owner must repair it)", k.Segment)
		}
	}
}

// liveSegments returns the open Log's sealed segments' sequence ranges and
// its reclaimed segment, before a restart.
func (r *run) liveSegments() (map[uint64][2]uint64, uint64) {
	segs := map[uint64][2]uint64{}
	if r.w.log == nil {
		return segs, 0
	}
	snap, err := r.w.log.Store().Snapshot()
	if err != nil {
		return segs, 0
	}
	for _, s := range snap.Segments {
		if s.Sealed && s.Events > 0 {
			segs[s.ID] = [2]uint64{s.FirstSeq, s.LastSeq}
		}
	}
	return segs, snap.ReclaimedSeg
}

// checkRepaired: after a successful ship pass of a Log opened since the
// restart noteMustRepair saw, each such segment object is no longer the
// damaged bytes (put again, or gone with a GC).
func (r *run) checkRepaired(err error) *violation {
	if err != nil || r.w.log == nil {
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(r.mustRepair)) {
		if r.w.opens <= r.mustRepair[key] {
			continue
		}
		if r.hiddenOpen > r.mustRepair[key] {
			r.logf("  (an open since the restart listed tail objects with some hidden: %s's read-back at start cannot be demanded)", key)
			delete(r.mustRepair, key)
			continue
		}
		if cur, ok := r.w.raw.Raw(key); ok && string(cur) == r.damaged[key] {
			return fail("damaged-segment-kept", "%s, damaged at rest while its tail copies were in the bucket, is still damaged after a restart and a successful ship pass (counted durable without a read-back)", key)
		}
		delete(r.mustRepair, key)
	}
	return nil
}

// lineageKeeps reports whether the tail object key (k) holds an event the
// lineage keeps (the two-writer model; always true with one writer). A
// stale writer's tail beyond the cut that ends its epoch is no copy of the
// owner's events: it never made a damaged segment the owner's to repair at
// start (seed 2106 of -sim.writers: a zombie's tail 24..25 over the owner's
// segment 1..24 whose own tail copies were cleaned up).
func (r *run) lineageKeeps(ctx context.Context, clean blobtier.Bucket, key string, k blobtier.Key) bool {
	if !r.cfg.Writers {
		return true
	}
	lin, err := r.chainNow(ctx)
	if err != nil {
		return true
	}
	info, err := clean.Stat(ctx, key)
	if err != nil {
		return true
	}
	return lin.ValidSeq(info.Meta.Epoch, k.FirstSeq)
}

// tailHides counts the firings of the rules now in force that hide objects
// from tail listings.
func (r *run) tailHides() int {
	n := 0
	for id := range r.w.rules {
		if rule := r.ruleOf[id]; rule.Kind == faultbucket.Hide && (rule.Key == "*" || rule.Key == "noetl.ehdb.tail.*") {
			n += r.w.fb.Fired(id)
		}
	}
	return n
}

// noteHiddenOpen runs after an open: when a tail listing hid objects during
// it (hides: tailHides before it), that open is hiddenOpen. Open reads a
// segment object back only while tail objects overlap it or the cursor
// object's shipped_through is below it (shipper's verifiedBefore: Open
// stays O(1) in the log's length); a listing that hides the overlapping
// tail objects (outside the contract: FENCING.md asks strong
// read-after-write for LIST, see cursorLostUnderHiddenList) makes a
// damaged segment look verified before, so its repair at that start
// cannot be demanded (seed 303984). A later open with an honest listing
// is demanded again (noteMustRepair notes it at the next restart).
func (r *run) noteHiddenOpen(hides int) {
	if r.tailHides() > hides {
		r.hiddenOpen = r.w.opens
	}
}
