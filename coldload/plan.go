package coldload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// Reader is the part of a bucket a cold load uses: reads and listings only.
// Having no write method is what makes a cold load unable to write to the
// bucket, whoever calls it. blobtier.Bucket implements it.
type Reader interface {
	// Get returns an object's bytes after checking its length and digest.
	Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error)
	// GetVersioned reads the rewritten objects (watermark, cursor).
	GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error)
	// List yields the objects of one kind of one shard in key order.
	List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error]
}

var _ Reader = blobtier.Bucket(nil)

// segObj is a listed segment object.
type segObj struct {
	id   uint64
	key  string
	size int64
}

// tailObj is a listed tail object; first and last come from its key.
type tailObj struct {
	first, last uint64
	key         string
	size        int64
}

// plan is what a cold load found in the bucket for one shard, before it
// reads any segment or tail object.
type plan struct {
	shard     uint32
	view      *bucketview.View // the read the plan was made from
	mark      watermark.Mark
	hasMark   bool
	cursor    tailbatch.Cursor
	hasCursor bool
	// cursorErr is set when the cursor object exists but is damaged (it
	// fails verification or does not decode): the cold load goes on without
	// it (hasCursor false, consumers from the frames alone).
	cursorErr error
	// segs are the segment objects above the watermark segment, in id order.
	segs []segObj
	// orphanSegs counts segment objects at or below the watermark segment
	// (left by a reclaim that crashed before its deletes): never read.
	orphanSegs int
	// maxSegID is the highest segment id listed, orphans and ids beyond a
	// gap included: the hydrated store's next segment must be above it.
	maxSegID uint64
	// tails are the tail objects whose last sequence is above the watermark,
	// sorted by first sequence, then by last sequence descending (so the
	// widest object of a group starting together comes first and the others
	// are superseded by it). maxLast[i] is the highest last over tails[:i+1].
	tails   []tailObj
	maxLast []uint64
	// orphanTails counts tail objects at or below the watermark: never read.
	orphanTails int
	// maxTailLast is the highest last sequence of any tail key listed,
	// those below the watermark included (0 when none).
	maxTailLast uint64
	// markSeg is the segment object the watermark names, when listed (a
	// reclaim's delete still to come): read only to support the watermark.
	markSeg *segObj
	// unparsed lists keys under the shard's segment or tail key space that
	// do not parse, or that name another shard or kind: never read.
	unparsed []string
	// lin is the chain of start records (lineage.go); gapSegs counts the
	// segment objects inside a cut's gap, skipped unread as a stale
	// writer's.
	lin     fencing.Lineage
	gapSegs int
	unused  []uint64 // unused start segments (lineage.go)
}

// empty reports that the bucket holds no usable object for the shard.
func (p *plan) empty() bool {
	return !p.hasMark && !p.hasCursor && p.cursorErr == nil && len(p.segs) == 0 && p.orphanSegs == 0 &&
		len(p.tails) == 0 && p.orphanTails == 0
}

// nextSegment is the id the hydrated store's empty active segment gets:
// above every segment id the bucket has seen, so the store never appends
// into an id that exists (or existed) in the bucket.
func (p *plan) nextSegment() uint64 { return max(p.maxSegID, p.mark.Segment) + 1 }

// same reports whether two plans saw the same bucket state (used to decide
// whether a failed attempt raced with the owner or found a real hole).
func (p *plan) same(q *plan) bool {
	return p.mark == q.mark && p.cursor.V == q.cursor.V && p.orphanSegs == q.orphanSegs &&
		slices.Equal(p.segs, q.segs) && slices.Equal(p.tails, q.tails) &&
		slices.Equal(p.lin.Records(), q.lin.Records()) && slices.Equal(p.lin.OffChain(), q.lin.OffChain())
}

// makePlan reads the watermark and the cursor object, then lists segments
// and tail objects, then the start records. The order matters when the
// owner is alive: the watermark first, so anything it reclaims is skipped;
// the cursor object before the listings, so every sequence its
// shipped_through claims was in the bucket before the listing started (the
// owner writes the cursor object only after the tail put it describes
// succeeded); the start records after the listings, so every epoch whose
// objects were listed has its cut read (bucketview's fencing order). A
// lineage that cannot be built is ErrLineage, before anything is written.
func makePlan(ctx context.Context, r Reader, shard uint32) (*plan, error) {
	p := &plan{shard: shard}
	v, err := bucketview.Read(ctx, r, shard, bucketview.Options{Parts: bucketview.All | bucketview.StartRecords, KeepDamagedCursor: true})
	var pe *bucketview.PartError
	if errors.As(err, &pe) {
		switch pe.Part {
		case bucketview.Watermark:
			return nil, &ObjectError{Key: blobtier.WatermarkKey(shard), Err: pe.Err}
		case bucketview.Cursor:
			return nil, &ObjectError{Key: blobtier.CursorKey(shard), Err: pe.Err}
		case bucketview.Segments:
			return nil, fmt.Errorf("coldload: list segments of shard %d: %w", shard, pe.Err)
		case bucketview.Tails:
			return nil, fmt.Errorf("coldload: list tail objects of shard %d: %w", shard, pe.Err)
		case bucketview.StartRecords:
			return nil, fmt.Errorf("coldload: %w", pe)
		}
	}
	if err != nil {
		return nil, err
	}
	if p.lin, err = v.Lineage(); err != nil {
		return nil, lineageErr(shard, err)
	}
	p.view = &v
	p.mark, p.hasMark = v.Mark, v.Version != ""
	if v.CursorDamaged {
		// A damaged cursor object must not brick the restore: the segments
		// and tail objects carry every consumer frame the bucket holds.
		err := v.CursorErr
		if !errors.Is(err, blobtier.ErrCorrupt) {
			err = fmt.Errorf("%w: %w", blobtier.ErrCorrupt, err)
		}
		p.cursor = tailbatch.Cursor{Consumers: map[string]uint64{}}
		p.cursorErr = &ObjectError{Key: blobtier.CursorKey(shard), Err: err}
	} else {
		p.cursor, p.hasCursor = v.Cur, v.CursorVersion != ""
	}
	for _, info := range v.Unparsed {
		p.unparsed = append(p.unparsed, info.Key)
	}

	for _, info := range v.SegmentObjects {
		id := info.Parsed.Segment
		p.maxSegID = max(p.maxSegID, id)
		if _, inGap := p.gapOf(id); inGap && id > p.mark.Segment {
			p.gapSegs++ // only a writer fenced below it writes there
			continue
		}
		if id <= p.mark.Segment {
			if id == p.mark.Segment && id > 0 {
				p.markSeg = &segObj{id: id, key: info.Key, size: info.Size}
			}
			p.orphanSegs++
			continue
		}
		p.segs = append(p.segs, segObj{id: id, key: info.Key, size: info.Size})
	}
	slices.SortFunc(p.segs, func(a, b segObj) int { return cmp.Compare(a.id, b.id) })
	p.segs = slices.CompactFunc(p.segs, func(a, b segObj) bool { return a.id == b.id })
	p.unused = p.unusedStarts()

	for _, info := range v.TailObjects {
		k := info.Parsed
		p.maxTailLast = max(p.maxTailLast, k.LastSeq)
		if k.LastSeq <= p.mark.Seq {
			p.orphanTails++
			continue
		}
		p.tails = append(p.tails, tailObj{first: k.FirstSeq, last: k.LastSeq, key: info.Key, size: info.Size})
	}
	slices.SortFunc(p.tails, func(a, b tailObj) int {
		if c := cmp.Compare(a.first, b.first); c != 0 {
			return c
		}
		return cmp.Compare(b.last, a.last)
	})
	p.maxLast = make([]uint64, len(p.tails))
	var hi uint64
	for i, t := range p.tails {
		hi = max(hi, t.last)
		p.maxLast[i] = hi
	}
	return p, nil
}

// tailsOverlapping returns the indexes of the tail objects whose key range
// meets [lo, hi].
func (p *plan) tailsOverlapping(lo, hi uint64) []int {
	// Tails are sorted by first; those starting after hi cannot meet the
	// range. Walking back from there, maxLast says when no earlier tail can
	// reach lo any more.
	end, _ := slices.BinarySearchFunc(p.tails, hi+1, func(t tailObj, v uint64) int {
		if t.first < v {
			return -1
		}
		return 1
	})
	var out []int
	for i := end - 1; i >= 0 && p.maxLast[i] >= lo; i-- {
		if p.tails[i].last >= lo {
			out = append(out, i)
		}
	}
	slices.Reverse(out)
	return out
}

// tailCoverage returns the highest sequence that tail keys cover
// contiguously from from (from-1 when none starts at or before from).
func (p *plan) tailCoverage(from uint64) uint64 {
	c := from - 1
	for _, t := range p.tails {
		if t.first > c+1 {
			break
		}
		c = max(c, t.last)
	}
	return c
}
