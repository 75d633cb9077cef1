package shipper

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// Open's reconcile under the lineage rule (docs/FORMAT.md, "Writer
// fencing"): a stale writer's objects beyond the cut that ended its epoch
// are not the bucket's history, so they neither make the local disk look
// behind the bucket or diverged from it, nor count in the rebuilt cursor.
//
// Listings carry no metadata, so an object's epoch is known only from its
// metadata: with a chain of start records, reconcile reads each tail object
// above the reclaim base (one GET, which the read-back of the newest one
// reuses), and HEADs each segment object at or above the lowest fence
// segment of the chain (below it every epoch that sealed was still the
// newest; the HEAD is the one the segment check reuses). A bucket without
// start records (unfenced, or written before fencing) has the lineage of
// epoch 0 and costs no request here.

// lineageFilter judges listed objects by the lineage one bucketview.Read
// found, caching each object's epoch.
type lineageFilter struct {
	s        *Shipper
	r        *openReads
	lin      fencing.Lineage
	on       bool   // the chain has a start record
	minFence uint64 // the lowest fence segment on the chain
	epochs   map[string]uint64
	zombies  map[string]bool
}

// noLineage is the filter of a bucket without start records.
func (s *Shipper) noLineage(r *openReads) *lineageFilter {
	return &lineageFilter{s: s, r: r, epochs: map[string]uint64{}, zombies: map[string]bool{}}
}

// newLineageFilter takes the lineage of v (read with StartRecords, or not:
// then it has no chain). A damaged or broken chain refuses the Open before
// anything changes.
func (s *Shipper) newLineageFilter(v *bucketview.View, r *openReads) (*lineageFilter, error) {
	f := s.noLineage(r)
	if v.Parts&bucketview.StartRecords == 0 {
		return f, nil
	}
	lin, err := v.Lineage()
	if err != nil {
		return nil, err
	}
	f.lin = lin
	recs := lin.Records()
	f.on = len(recs) > 0
	for i, r := range recs {
		if i == 0 || r.FenceSegment < f.minFence {
			f.minFence = r.FenceSegment
		}
	}
	return f, nil
}

// epoch HEADs info for its epoch (cached). known is false when its
// metadata is damaged: such an object is judged as before fencing (the
// checks that read it decide).
func (f *lineageFilter) epoch(ctx context.Context, info blobtier.ObjectInfo) (e uint64, known bool, err error) {
	if e, ok := f.epochs[info.Key]; ok {
		return e, true, nil
	}
	if info.Parsed.Kind == blobtier.KindTail {
		// The read-back the checks need carries the epoch too.
		_, m, err := f.r.get(ctx, info.Key)
		if err == nil {
			f.epochs[info.Key] = m.Epoch
			return m.Epoch, true, nil
		}
		if !errors.Is(err, blobtier.ErrCorrupt) {
			return 0, false, fmt.Errorf("read %s: %w", info.Key, err)
		}
		// Damaged: its metadata alone may still be intact.
	}
	st, err := f.r.stat(ctx, info.Key)
	if errors.Is(err, blobtier.ErrCorrupt) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("stat %s: %w", info.Key, err)
	}
	f.epochs[info.Key] = st.Meta.Epoch
	return st.Meta.Epoch, true, nil
}

// tails returns the tail objects of in that are whole in the lineage
// (every frame valid), and the highest valid sequence of the ones only a
// prefix of which is valid (their epoch ended inside them): those count
// toward the bucket's tip, but are neither compared with the local log nor
// counted in the rebuilt cursor (their events are shipped again, under our
// epoch). Objects at or below base are kept unjudged: the watermark covers
// them. Zombie objects are left out and remembered.
func (f *lineageFilter) tails(ctx context.Context, in []blobtier.ObjectInfo, base uint64) (whole []blobtier.ObjectInfo, partialTip uint64, err error) {
	if !f.on {
		return in, 0, nil
	}
	for _, info := range in {
		k := info.Parsed
		if k.LastSeq <= base {
			whole = append(whole, info)
			continue
		}
		e, known, err := f.epoch(ctx, info)
		if errors.Is(err, blobtier.ErrNotFound) {
			continue // deleted since the listing: a sealed segment holds its events
		}
		if err != nil {
			return nil, 0, err
		}
		end, ended := f.lin.End(e)
		switch {
		case !known || (f.lin.OnChain(e) && (!ended || k.LastSeq <= end)):
			whole = append(whole, info)
		case f.lin.OnChain(e) && k.FirstSeq <= end:
			partialTip = max(partialTip, end)
		default:
			f.zombie(info, e)
		}
	}
	return whole, partialTip, nil
}

// skipSegment reports whether a segment object is outside the lineage:
// inside a cut's gap (no HEAD needed), of an epoch off the chain, or a
// stale writer's seal at or above the fence of the cut that ended its
// epoch.
func (f *lineageFilter) skipSegment(ctx context.Context, info blobtier.ObjectInfo) (bool, error) {
	id := info.Parsed.Segment
	if !f.on || id < f.minFence {
		return false, nil
	}
	if f.lin.Gap(id) {
		// Inside a cut's gap: the new owner continues at start_segment
		// (the store's jump), so only a fenced writer writes there.
		f.zombie(info, 0)
		return true, nil
	}
	e, known, err := f.epoch(ctx, info)
	if err != nil || !known {
		return false, err
	}
	if f.lin.SkipSegment(e, id) {
		f.zombie(info, e)
		return true, nil
	}
	return false, nil
}

func (f *lineageFilter) zombie(info blobtier.ObjectInfo, e uint64) {
	if f.zombies[info.Key] {
		return
	}
	f.zombies[info.Key] = true
	f.s.log.Warn("a stale writer's object outside the shard's lineage is ignored", "key", info.Key, "epoch", e)
}

// holdsLocal reports whether a segment object that is not byte-identical
// to the local sealed segment still holds exactly it under the lineage: a
// stale writer's seal of an ended epoch below the cut's fence whose
// events run past end(e), cut just after event end(e) as every cold load
// cuts it (the local segment was hydrated that way), or whose events all
// lie beyond end(e) against an empty local segment (the slot a cold load
// keeps for it). Such an object is durable for us: a restore reads from it
// exactly the local segment.
func (f *lineageFilter) holdsLocal(ctx context.Context, info blobtier.ObjectInfo, seg localseg.SegmentInfo) (bool, error) {
	if !f.on {
		return false, nil
	}
	e, known, err := f.epoch(ctx, info)
	if err != nil || !known {
		return false, err
	}
	end, ended := f.lin.End(e)
	if !ended || seg.LastSeq != end || f.lin.SkipSegment(e, info.Parsed.Segment) {
		return false, nil
	}
	obj, _, err := f.s.b.Get(ctx, info.Key)
	if errors.Is(err, blobtier.ErrCorrupt) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read back %s: %w", info.Key, err)
	}
	local, err := f.s.store.ReadSegment(seg.ID)
	if err != nil {
		return false, err
	}
	for off := 0; off < len(obj); {
		fr, n, err := frame.Decode(obj[off:])
		if err != nil || n <= 0 {
			return false, nil
		}
		off += n
		if fr.Kind == frame.KindEvent && fr.Seq > end {
			// No valid frame at all (every event beyond the cut): a
			// cold load keeps its id as an empty segment file.
			return len(local) == 0, nil
		}
		if fr.Kind == frame.KindEvent && fr.Seq == end {
			return off < len(obj) && bytes.Equal(obj[:off], local), nil
		}
	}
	return false, nil
}
