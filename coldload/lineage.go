package coldload

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/frame"
)

// The lineage rule (docs/FORMAT.md, "Writer fencing"), applied by every
// cold load: Hydrate (a new owner, a restore, a non-owner read) and Verify.
//
//   - A frame in an object of epoch e (its `epoch` metadata, 0 when absent)
//     is valid iff e is on the chain of start records, its sequence is at
//     most end(e), and it is above the watermark (the watermark is applied
//     as before). An object's valid Event frames are therefore a prefix of
//     its events; a consumer frame goes with the next Event frame of the
//     object (with the previous one when no Event follows), so the object
//     is cut just after its last valid Event unless that is its last Event.
//   - Objects of an epoch off the chain, segment objects of an ended epoch
//     at or above the fence of the cut that ended it (fencing.SkipSegment),
//     segment objects inside a cut's gap between fence_segment and
//     start_segment (only a fenced writer writes there), and objects holding
//     no valid frame are skipped and counted (Report.ZombieObjects,
//     ShardReport.ZombieObjects). A skipped segment still occupies its id.
//   - Segment ids may skip exactly a cut's gap, and the start segment of an
//     ended epoch that sealed nothing; sequences never skip. A new owner's
//     segments start at its cut's start_segment (localseg's JumpTo), so
//     every segment object inside a gap is a fenced writer's.
//   - Valid duplicates must be byte-identical (a *ConflictError naming both
//     keys, as before).
//
// A bucket without start records has the lineage of epoch 0: everything in
// it is valid, exactly as before fencing. A damaged start record or a broken
// chain is ErrLineage before anything is written locally.
//
// A restore keeps the bucket's segment ids: each gap between the ids it
// writes (a cut's gap, an unused start segment, ids it fills past a
// partial restore's hole left aside) is recorded in the store's jumps.json
// (localseg.RecordJump), which is what makes the gap legal to localseg.

// ErrLineage: the bucket's start records do not form a chain a reader can
// follow (a damaged record, a record contradicting itself, or a start
// record missing from the middle of the chain). It also matches
// fencing.ErrBadRecord or fencing.ErrBrokenChain.
var ErrLineage = errors.New("coldload: the shard's start records do not form a lineage")

// Fenced is what a cold load reports about writer fencing (part of Report
// and ShardReport; the JSON of `restore` and `verify`).
type Fenced struct {
	// ZombieObjects counts the segment and tail objects skipped under the
	// lineage rule (a stale writer's, or holding no valid frame).
	ZombieObjects int `json:"zombie_objects"`
	// Lineage is the chain the cold load followed.
	Lineage LineageReport `json:"lineage"`
	// HighestSegmentID is the highest segment id the bucket listed (in
	// bucket ids: gaps and stale writers' objects included, unlike
	// NextSegment, which counts in the restored store's ids). A new cut's
	// fence lies above it and above Lineage.HighestStartSegment.
	HighestSegmentID uint64 `json:"highest_segment_id"`
	// Listing is the one read of the bucket the cold load followed (its
	// start records, segments and tail objects): a takeover's post-claim
	// listing, which its cut and the start-up checks then take over
	// instead of listing again. Not in the JSON.
	Listing *bucketview.View `json:"-"`
}

// LineageReport is a chain of start records as a report shows it.
type LineageReport struct {
	// Epochs are the started epochs, oldest first: 0 and every epoch on the
	// chain.
	Epochs []uint64 `json:"epochs"`
	// Cuts are the chain's start records, oldest first.
	Cuts []fencing.StartRecord `json:"cuts"`
	// OffChain are the epochs whose start records are not on the chain.
	OffChain []uint64 `json:"off_chain"`
	// HighestStartSegment is the highest start_segment of any start
	// record, on the chain or off it (0 when none).
	HighestStartSegment uint64 `json:"highest_start_segment"`
}

// ReportLineage describes l.
func ReportLineage(l fencing.Lineage) LineageReport {
	r := LineageReport{Epochs: []uint64{0}, Cuts: l.Records(), OffChain: l.OffChain(), HighestStartSegment: l.HighestStartSegment()}
	for _, c := range r.Cuts {
		r.Epochs = append(r.Epochs, c.Epoch)
	}
	if r.Cuts == nil {
		r.Cuts = []fencing.StartRecord{}
	}
	if r.OffChain == nil {
		r.OffChain = []uint64{}
	}
	return r
}

func lineageErr(shard uint32, err error) error {
	return fmt.Errorf("%w: shard %d: %w", ErrLineage, shard, err)
}

// gapOf returns the chain's record whose (taken) gap holds segment id.
func (p *plan) gapOf(id uint64) (fencing.StartRecord, bool) {
	for _, r := range p.lin.Records() {
		if id >= r.FenceSegment && id < r.StartSegment {
			return r, true
		}
	}
	return fencing.StartRecord{}, false
}

// follows reports whether segment id may follow segment prev: it is the
// next id, or every id between them lies in a cut's gap or is an unused
// start segment.
func (p *plan) follows(prev, id uint64) bool {
	for x := prev + 1; x < id; {
		if r, ok := p.gapOf(x); ok {
			x = r.StartSegment
			continue
		}
		if !slices.Contains(p.unused, x) {
			return false
		}
		x++
	}
	return id > prev
}

// unusedStarts returns the start segments of ended epochs that sealed
// nothing: the cut that ended such an epoch put its fence right above the
// epoch's start segment (above every start segment it saw), and no object
// holds that id. It is the one id outside a gap a valid history skips.
func (p *plan) unusedStarts() []uint64 {
	var out []uint64
	for _, r := range p.lin.Records() {
		prev, ok := p.lin.Record(r.PrevEpoch)
		if !ok || r.FenceSegment != prev.StartSegment+1 || prev.StartSegment <= p.mark.Segment {
			continue
		}
		if _, held := slices.BinarySearchFunc(p.segs, prev.StartSegment, func(s segObj, id uint64) int { return cmp.Compare(s.id, id) }); !held {
			out = append(out, prev.StartSegment)
		}
	}
	return out
}

// skipped returns the id after the legal skip (a cut's gap, an unused start
// segment) that holds id, and false when none holds it.
func (p *plan) skipped(id uint64) (uint64, bool) {
	if r, ok := p.gapOf(id); ok {
		return r.StartSegment, true
	}
	if slices.Contains(p.unused, id) {
		return id + 1, true
	}
	return 0, false
}

// validEnd returns the last valid sequence of an object of epoch e whose
// events run first..last, and whether any event is valid. ok is false for
// an epoch off the chain.
func (p *plan) validEnd(e, first, last uint64) (end uint64, ok bool) {
	if !p.lin.OnChain(e) {
		return 0, false
	}
	if ended, isEnded := p.lin.End(e); isEnded && ended < last {
		if ended < first {
			return 0, false
		}
		return ended, true
	}
	return last, true
}

// filterTail applies the lineage rule to a decoded tail object of epoch e:
// it returns the valid frames (a prefix) and false when none is valid.
func (p *plan) filterTail(t tailObj, e uint64, frames []decoded) ([]decoded, bool) {
	end, ok := p.validEnd(e, t.first, t.last)
	if !ok {
		return nil, false
	}
	if end == t.last {
		return frames, true
	}
	for i, d := range frames {
		if d.f.Kind == frame.KindEvent && d.f.Seq == end {
			return frames[:i+1], true
		}
	}
	return nil, false // unreachable for a verified object
}

// truncateSegment cuts a verified segment image just after its Event frame
// of sequence end (the lineage drops everything after it).
func truncateSegment(data []byte, end uint64) ([]byte, error) {
	for off := 0; off < len(data); {
		f, n, err := frame.Decode(data[off:])
		if err != nil {
			return nil, frameErr(off, err)
		}
		if n <= 0 || n > len(data)-off {
			return nil, corruptf("frame at offset %d has length %d", off, n)
		}
		off += n
		if f.Kind == frame.KindEvent && f.Seq == end {
			return data[:off], nil
		}
	}
	return nil, corruptf("no event %d to cut the segment at", end)
}

// zombies counts the objects a run skipped under the lineage rule.
type zombies struct {
	segs  atomic.Int64
	tails []atomic.Bool // per tail object (an object is counted once)
}

func (z *zombies) tail(i int) { z.tails[i].Store(true) }

func (z *zombies) isTail(i int) bool { return z.tails[i].Load() }

func (z *zombies) count(gapSegs int) int {
	n := int(z.segs.Load()) + gapSegs
	for i := range z.tails {
		if z.tails[i].Load() {
			n++
		}
	}
	return n
}

func newZombies(p *plan) zombies { return zombies{tails: make([]atomic.Bool, len(p.tails))} }

// segmentLineage applies the lineage rule to a verified segment image of
// epoch e: it returns the image and summary to restore (cut after its last
// valid event), or marks the item a zombie (nil image, no event) when the
// fence rule skips it or it holds no valid frame.
func (h *run) segmentLineage(it *segItem, e uint64, data []byte, sum frame.SegmentSummary) ([]byte, frame.SegmentSummary, error) {
	zombie := func() ([]byte, frame.SegmentSummary, error) {
		it.zombie = true
		h.zomb.segs.Add(1)
		return nil, frame.SegmentSummary{}, nil
	}
	if h.p.lin.SkipSegment(e, it.id) {
		return zombie()
	}
	if sum.Events == 0 {
		return data, sum, nil // consumer frames of an epoch on the chain
	}
	end, ok := h.p.validEnd(e, sum.FirstSeq, sum.LastSeq)
	if !ok {
		return zombie()
	}
	if end == sum.LastSeq {
		return data, sum, nil
	}
	cut, err := truncateSegment(data, end)
	if err != nil {
		return nil, sum, err
	}
	sum, err = frame.VerifySegment(it.id, cut, 0)
	return cut, sum, err
}

// account adds what the run read and skipped to a Hydrate's report.
func (h *run) account(rep *Report) {
	rep.Objects += int(h.reads.Load())
	rep.Bytes += h.readBytes.Load()
	rep.ZombieObjects, rep.HighestSegmentID = h.zomb.count(h.p.gapSegs), h.p.maxSegID
}
