package shipper

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// reconcile is the start-up half of Open (docs/FORMAT.md §7.4): it reads the bucket's
// watermark, segments, tail objects and cursor object, refuses a stale or
// diverged disk, learns which local segments are durable in the bucket,
// aligns the watermark with the local reclaim base, and rebuilds the tail
// cursor from the bucket (never from the local tip).
//
// Every check runs before anything is changed: a refused Open leaves the
// shard directory byte-identical and the bucket as it found it. Only once
// the verdict is in does it repair a damaged watermark, adopt the bucket's
// watermark locally (Reclaim) and commit a local reclaim base above it.
func (s *Shipper) reconcile(ctx context.Context) error {
	s.durable, s.hold = map[uint64]bool{}, nil
	snap, err := s.store.Snapshot()
	if err != nil {
		return err
	}
	// One read of the shard's bucket state, each verdict reached as soon
	// as its part is in (a refused Open issues no request past it).
	var (
		base, baseSeg uint64                // the reclaim base the checks take
		lowRetained   uint64                // the lowest sequence a retained object above the base holds (0: none)
		ownTails      []blobtier.ObjectInfo // tail objects above the base the local store also holds
		bucketTip     uint64
		tails         []blobtier.Key                 // tail objects above the base
		readStarts    = s.fencingOn()                // the lineage: a stale writer's objects are not the bucket's history
		reads         = newOpenReads(s.b)            // each object read once (reconcile_reads.go)
		lf            = s.noLineage(reads)           // until the start records are in (reconcile_lineage.go)
		tip           func(v *bucketview.View) error // judges the tail objects and the cursor object
	)
	lower := func(seq uint64) {
		if lowRetained == 0 || seq < lowRetained {
			lowRetained = seq
		}
	}
	check := func(v *bucketview.View, done bucketview.Parts) error {
		switch done {
		case bucketview.Watermark:
			if v.WatermarkDamaged {
				// A damaged watermark would stop GC and every restore. The
				// owner rewrites it, but only after the checks below
				// passed, and never below what the bucket's retained
				// objects imply (repairTarget).
				s.log.Error("the reclaim watermark is damaged; it is rewritten once the start-up checks pass", "err", v.WatermarkErr)
			}
			// The bucket's reclaim went further than the local store (a
			// pass crashed after committing the watermark, or another
			// owner reclaimed): the watermark's segment must end at the
			// watermark's sequence locally. It is adopted (Reclaim) only
			// after every check; until then the checks take the base it
			// names.
			base, baseSeg = snap.ReclaimedSeq, snap.ReclaimedSeg
			if v.Mark.Segment > snap.ReclaimedSeg {
				if err := adoptable(snap, v.Mark); err != nil {
					return err
				}
				base, baseSeg = v.Mark.Seq, v.Mark.Segment
			}
		case bucketview.Cursor:
			if v.CursorDamaged {
				// A damaged cursor object must not keep the owner down: the
				// owner rebuilds it from its own state once the checks
				// pass. Without its shipped_through, the bucket's tip comes
				// from the objects alone.
				s.log.Error("the cursor object is damaged; it is rebuilt once the start-up checks pass", "key", blobtier.CursorKey(s.shard), "err", v.CursorErr)
			}
			if !readStarts {
				return tip(v)
			}
		case bucketview.StartRecords:
			var err error
			if lf, err = s.newLineageFilter(v, reads); err != nil {
				return err
			}
			return tip(v)
		}
		return nil
	}
	tip = func(v *bucketview.View) error {
		// The bucket's tip: tail objects (those of the lineage:
		// reconcile_lineage.go) and the cursor object's shipped_through.
		tailObjs, partialTip, err := lf.tails(ctx, v.TailObjects, base)
		if err != nil {
			return err
		}
		bucketTip = partialTip
		for _, info := range tailObjs {
			bucketTip = max(bucketTip, info.Parsed.LastSeq)
			if info.Parsed.LastSeq > base {
				lower(info.Parsed.FirstSeq)
				tails = append(tails, info.Parsed)
			}
			if info.Parsed.LastSeq > base && info.Parsed.LastSeq <= snap.Tip {
				ownTails = append(ownTails, info)
			}
		}
		bucketTip = max(bucketTip, v.Cur.ShippedThrough)
		if bucketTip > snap.Tip {
			return fmt.Errorf("%w: the bucket holds sequences through %d, the local store through %d", ErrStaleDisk, bucketTip, snap.Tip)
		}
		return nil
	}
	parts := bucketview.All
	if readStarts {
		parts |= bucketview.StartRecords
	}
	view, err := s.listing(ctx, bucketview.Options{
		Parts: parts,
		// Tail objects before the cursor object, both before the segments:
		// the stale-disk verdict needs no segment listing (with fencing it
		// waits for the start records, read last as in FencingOrder).
		Order:                []bucketview.Parts{bucketview.Watermark, bucketview.Tails, bucketview.Cursor, bucketview.Segments, bucketview.StartRecords},
		KeepDamagedWatermark: s.b.CanCAS() && (snap.Tip > 0 || snap.ReclaimedSeg > 0),
		KeepDamagedCursor:    true,
		Check:                check,
	})
	if err != nil {
		return err
	}
	wm, wmDamaged, cur, curDamaged := view.Mark, view.WatermarkDamaged, view.Cur, view.CursorDamaged

	local := map[uint64]localseg.SegmentInfo{}
	var highest uint64
	for _, seg := range snap.Segments {
		local[seg.ID] = seg
		highest = max(highest, seg.ID)
	}
	var bucketSegs []blobtier.ObjectInfo
	var damagedSegs []string
	s.healing = map[uint64]bool{}
	var reput []tailbatch.SegRange // damaged segments of ours, put again from the local copy
	var reputIDs []uint64          // their ids
	for _, info := range view.SegmentObjects {
		if info.Parsed.Segment > wm.Segment {
			if skip, err := lf.skipSegment(ctx, info); err != nil {
				return err
			} else if skip {
				continue
			}
			bucketSegs = append(bucketSegs, info)
		}
	}
	for _, info := range bucketSegs {
		id := info.Parsed.Segment
		seg, ok := local[id]
		switch {
		case id <= baseSeg:
			// Reclaimed locally; the object is an orphan the next GC removes.
			continue
		case id > highest || (ok && !seg.Sealed):
			return fmt.Errorf("%w: the bucket holds segment %d (%s) and the local store's active segment is %d", ErrStaleDisk, id, info.Key, highest)
		case !ok:
			if passed, err := s.passedOver(ctx, info); err != nil || passed {
				if err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("%w: the bucket holds segment %d (%s) that the local store lacks", ErrDiverged, id, info.Key)
		}
		match, damaged, err := s.matches(ctx, reads, info, seg, !verifiedAtStart(seg, snap.Segments, cur.ShippedThrough, tails))
		if err != nil {
			return err
		}
		lower(seg.FirstSeq)
		if damaged {
			// Our own upload, damaged in the bucket: not durable. It is
			// deleted after the verdict and uploaded again.
			damagedSegs = append(damagedSegs, info.Key)
			reput = append(reput, tailbatch.SegRange{FirstSeq: seg.FirstSeq, LastSeq: seg.LastSeq})
			reputIDs = append(reputIDs, id)
			continue
		}
		if _, evicted := s.evictedMatch(seg, blobtier.Meta{}); !match && evicted {
			return fmt.Errorf("%w: segment %d, evicted from the local disk, differs from the bucket's object %s", ErrDiverged, id, info.Key)
		}
		if !match {
			if heal, err := s.healable(ctx, reads, info, seg); err != nil || heal {
				if err != nil {
					return err
				}
				s.durable[id], s.healing[id] = true, true // heal.go: replaced after the open's verdict
				continue
			}
			if match, err = lf.holdsLocal(ctx, info, seg); err != nil || !match {
				return cmp.Or(err, fmt.Errorf("%w: segment %d differs from the bucket's object %s", ErrDiverged, id, info.Key))
			}
		}
		s.durable[id] = true
	}

	if err := s.checkEvicted(snap, max(baseSeg, wm.Segment)); err != nil {
		return err
	}
	trusted, _ := watermark.Contiguous(snap.Segments, func(id uint64) bool { return s.durable[id] })
	damagedTails, err := s.checkTails(ctx, reads, ownTails, base, max(trusted, cur.ShippedThrough), snap.Segments)
	if err != nil {
		return err
	}

	// The verdict is in: from here on the shard directory and the bucket
	// may change.
	s.healAtStart()
	for _, key := range damagedSegs {
		// Not deleted here: a read damaged on the way looks the same, and
		// the object may be intact. The uploader's first pass reads it
		// back after its put and replaces it only if it is damaged
		// (putSegment).
		s.log.Error("a segment of this shard reads back damaged from the bucket; the uploader puts it again", "key", key)
	}
	if wmDamaged {
		if lowRetained == 0 {
			// Nothing retained above the local base: the bucket held
			// through the cursor object's shipped_through, and reclaimed it.
			lowRetained = cur.ShippedThrough + 1
		}
		seq, seg := repairTarget(snap, lowRetained)
		s.log.Error("the reclaim watermark is damaged; rewriting it", "seq", seq, "segment", seg,
			"local_reclaimed_seq", snap.ReclaimedSeq, "lowest_retained_seq", lowRetained)
		// durable_seq: the contiguous durable end the checks found.
		durable, _ := s.contiguous()
		if wm, err = watermark.Repair(ctx, s.b, s.shard, seq, seg, durable); err != nil {
			return fmt.Errorf("repair the reclaim watermark: %w", err)
		}
		if wm.Segment > snap.ReclaimedSeg {
			if err := adoptable(snap, wm); err != nil {
				return err
			}
		}
	}
	if wm.Segment > snap.ReclaimedSeg {
		res, err := s.store.Reclaim(wm.Segment)
		if err != nil {
			return fmt.Errorf("adopt the bucket's watermark (segment %d, sequence %d): %w", wm.Segment, wm.Seq, err)
		}
		if res.ThroughSeq != wm.Seq {
			return fmt.Errorf("%w: the bucket's watermark ends segment %d at sequence %d, the local store at %d", ErrDiverged, wm.Segment, wm.Seq, res.ThroughSeq)
		}
		if snap, err = s.store.Snapshot(); err != nil {
			return err
		}
	}

	// A store reclaimed locally beyond the bucket's watermark commits the
	// watermark before anything above it is uploaded, so a restore never
	// looks for reclaimed events.
	if snap.ReclaimedSeg > wm.Segment {
		if !s.b.CanCAS() {
			return usagef("the local store was reclaimed through segment %d, and this bucket cannot hold a reclaim watermark safely (no compare-and-swap)", snap.ReclaimedSeg)
		}
		if wm, err = watermark.Advance(ctx, s.b, s.shard, snap.ReclaimedSeq, snap.ReclaimedSeg); err != nil {
			return fmt.Errorf("commit the local reclaim base as the watermark: %w", err)
		}
	}
	s.wm = wm

	var ranges []tailbatch.SegRange
	for _, seg := range snap.Segments {
		if s.durable[seg.ID] {
			ranges = append(ranges, tailbatch.SegRange{FirstSeq: seg.FirstSeq, LastSeq: seg.LastSeq})
		}
	}
	// The deletes the cursor object does not carry (recalldeletes.go):
	// from its shipped_through event, or from what the durable segments
	// cover when it is damaged or absent (the rebuilt one is not below).
	from := cur.ShippedThrough
	if curDamaged || cur.V == 0 {
		from = trusted
	}
	if err := s.recallDeletes(from, cur, snap); err != nil {
		return err
	}
	dsnap, err := s.store.Snapshot()
	if err != nil {
		return err
	}
	// A damaged tail object is not shipped: it is left out of the cursor,
	// and the next tick ships its events again. It is not deleted here: a
	// read damaged on the way looks the same, and the object may be intact
	// and vouched for by the cursor object. The tick's upload replaces it
	// when its batch has the same key; otherwise a restore passes over it
	// (the new object holds its events) and tail cleanup removes it.
	// (A copy: DeleteFunc clears the slice it filters, and the damaged
	// cursor's floor below counts the whole listing.)
	// The tail objects of the one listing the checks judged (no second
	// listing: until this shipper starts, only a stale writer adds tail
	// objects, and the lineage leaves those out).
	lineageTails, _, err := lf.tails(ctx, view.TailObjects, snap.ReclaimedSeq)
	if err != nil {
		return err
	}
	intact := slices.DeleteFunc(slices.Clone(lineageTails), func(info blobtier.ObjectInfo) bool { return damagedTails[info.Key] })
	shipped := tailbatch.CursorFrom(s.shard, snap.ReclaimedSeq, ranges, intact)
	s.repl = tailbatch.New(s.shard, shipped, tailbatch.Options{Disabled: !s.tailOn, Epoch: s.o.Epoch})
	switch {
	case curDamaged && (len(reputIDs) > 0 || heldTails(damagedTails, shipped) > 0):
		// Not rebuilt yet: its floor counts our damaged segments and tail
		// objects, and must not vouch for them before they are in the
		// bucket intact again (cursorhold.go). Until then the damaged
		// object stays, so a start after a stop reads them back again.
		s.hold = &cursorHold{floor: tailbatch.CursorFrom(s.shard, snap.ReclaimedSeq, append(ranges, reput...), lineageTails), segs: reputIDs, tails: heldTails(damagedTails, shipped)}
		s.log.Error("the cursor object is damaged; it is rebuilt once the damaged segments are put again and the damaged tails' events shipped again", "key", blobtier.CursorKey(s.shard),
			"shipped_through", s.hold.floor, "segments", reputIDs, "tails_through", s.hold.tails)
	case curDamaged:
		// The damaged object's shipped_through is lost, and the rebuilt one
		// must not lower it (the oracle of issue 12: shipped_through never
		// moves backward): it is at least what the bucket's objects imply,
		// counting our damaged segments, which the uploader puts again.
		floor := tailbatch.CursorFrom(s.shard, snap.ReclaimedSeq, append(ranges, reput...), lineageTails)
		var c tailbatch.Cursor
		if floor > shipped {
			c, err = tailbatch.WriteCursorDeleted(ctx, s.b, s.shard, floor, snap.Consumers, dsnap.Deleted, dsnap.Tip)
		} else {
			c, err = s.repl.SyncCursorDeleted(ctx, s.b, snap.Consumers, dsnap.Deleted, dsnap.Tip)
		}
		if err != nil {
			s.m.CursorWriteFailed.Inc()
			return fmt.Errorf("rebuild the damaged cursor object: %w", err)
		}
		s.log.Error("the cursor object was damaged; rebuilt from the owner's state", "key", blobtier.CursorKey(s.shard),
			"shipped_through", c.ShippedThrough, "consumers", len(c.Consumers))
		if floor > shipped {
			s.repl.KnowCursor(snap.Consumers, c.ShippedThrough)
		}
	default:
		// The consumers the bucket's cursor object holds now: a consumer
		// deleted (or acked) before the next event must still rewrite it,
		// or a later restore brings the deleted consumer back.
		if err := s.dropCursorDeleted(cur, snap); err != nil {
			return err
		}
		s.repl.KnowCursor(cur.Consumers, cur.ShippedThrough)
	}
	s.listed = &view
	s.rec.BucketTip = bucketTip
	s.rec.ShippedThrough = shipped
	s.rec.DurableSegments = len(s.durable)
	s.rec.Watermark = wm.Seq
	if shipped < snap.Tip {
		s.unshippedSince.Store(s.o.Now().UnixNano())
	}
	return nil
}

// matches reports whether the bucket's object holds exactly the local
// sealed segment's bytes, read back and verified: never the mere presence
// of the key, nor its metadata alone (a put may have landed damaged bytes
// under the right metadata, and a failed read-back left it behind). Without
// readBack (the object was read back intact before: verifiedBefore) the
// metadata must still name the local bytes. damaged reports an object of our own (its metadata names the local bytes)
// whose bytes fail verification: it is not durable, and the uploader
// puts it again (replacing it only if its read-back is damaged).
func (s *Shipper) matches(ctx context.Context, reads *openReads, info blobtier.ObjectInfo, seg localseg.SegmentInfo, readBack bool) (match, damaged bool, err error) {
	st, err := reads.stat(ctx, info.Key)
	if errors.Is(err, blobtier.ErrCorrupt) {
		// No valid metadata: not an object this shard's writer made.
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("stat %s: %w", info.Key, err)
	}
	if match, evicted := s.evictedMatch(seg, st.Meta); evicted {
		return match, false, nil
	}
	data, err := s.store.ReadSegment(seg.ID)
	if err != nil {
		return false, false, err
	}
	if st.Meta.Length != int64(len(data)) || st.Meta.XXH64 != blobtier.Digest(data) {
		return false, false, nil
	}
	if !readBack {
		return true, false, nil
	}
	// A read damaged on the way looks like a damaged object, and the
	// verdict deletes a damaged one: read once more before believing it.
	var got []byte
	for try := 0; try < 2; try++ {
		if got, _, err = s.b.Get(ctx, info.Key); !errors.Is(err, blobtier.ErrCorrupt) {
			break
		}
	}
	if errors.Is(err, blobtier.ErrCorrupt) {
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("read back %s: %w", info.Key, err)
	}
	return bytes.Equal(got, data), false, nil
}

// compareTail checks that the newest tail object the local store also
// covers holds the same events as the local log (above base, which the
// watermark reclaims). It reads the local segments that hold the object's
// events — a tail object lies within one segment — and never the store's
// read index, so Open stays O(1) in the log's length.
func (s *Shipper) compareTail(ctx context.Context, info blobtier.ObjectInfo, data []byte, base uint64, segs []localseg.SegmentInfo) error {
	var (
		loaded localseg.SegmentInfo // the segment whose events are in local
		local  map[uint64]frame.Frame
	)
	for f, err := range frame.Frames(data) {
		if err != nil {
			return fmt.Errorf("%w: tail object %s: %v", ErrDiverged, info.Key, err)
		}
		if f.Kind != frame.KindEvent || f.Seq <= base {
			continue
		}
		if local == nil || f.Seq < loaded.FirstSeq || f.Seq > loaded.LastSeq {
			seg, ok := segmentHolding(segs, f.Seq)
			if !ok && s.unreadEvicted(segs, f.Seq) {
				return nil // in segments a lazy hydrate left in the bucket, unread (lazyread.go)
			}
			if !ok {
				return fmt.Errorf("%w: sequence %d of tail object %s is not in the local store", ErrDiverged, f.Seq, info.Key)
			}
			if local, err = s.segmentEvents(seg, info.Parsed.FirstSeq, info.Parsed.LastSeq); err != nil {
				return err
			}
			loaded = seg
		}
		rec, ok := local[f.Seq]
		if !ok {
			return fmt.Errorf("%w: sequence %d of tail object %s is not in local segment %d", ErrDiverged, f.Seq, info.Key, loaded.ID)
		}
		if rec.ExecutionID != f.ExecutionID || rec.TransactionID != f.TransactionID || rec.Payload != f.Payload {
			return fmt.Errorf("%w: sequence %d differs between the local store and tail object %s", ErrDiverged, f.Seq, info.Key)
		}
	}
	return nil
}

// segmentHolding returns the local segment whose events include seq.
func segmentHolding(segs []localseg.SegmentInfo, seq uint64) (localseg.SegmentInfo, bool) {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].LastSeq >= seq })
	if i == len(segs) || segs[i].Events == 0 || segs[i].FirstSeq > seq {
		return localseg.SegmentInfo{}, false
	}
	return segs[i], true
}

// segmentEvents reads the durable bytes of a local segment and returns its
// event frames from first through last.
func (s *Shipper) segmentEvents(seg localseg.SegmentInfo, first, last uint64) (map[uint64]frame.Frame, error) {
	data, err := s.localBytes(seg)
	if err != nil {
		return nil, err
	}
	out := map[uint64]frame.Frame{}
	for f, err := range frame.Frames(data) {
		if err != nil {
			var ce *frame.CorruptionError
			if errors.As(err, &ce) {
				ce.Segment = seg.ID
			}
			return nil, fmt.Errorf("local segment %d: %w", seg.ID, err)
		}
		if f.Kind == frame.KindEvent && f.Seq >= first && f.Seq <= last {
			out[f.Seq] = f
		}
	}
	return out, nil
}
