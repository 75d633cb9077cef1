package coldload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// segItem is one segment object to read, and what reading it found.
type segItem struct {
	segObj
	// probe: the first segment after a hole in the ids. It is read only to
	// name the missing sequence range, never written.
	probe bool

	done bool // read (or failed); guarded by the checker's mutex after start
	// damaged: its bytes failed blobtier's length or digest check (a put
	// that landed damaged, or damage at rest); err says so. damagedseg.go
	// decides whether the restore may pass over it.
	damaged bool
	zombie  bool // skipped under the lineage rule (lineage.go): it holds no frame here
	sum     frame.SegmentSummary
	cons    *segConsumers // its consumer frames (Hydrate with a cursor object)
	err     error
	written bool
	// evicted: a lazy hydrate leaves it in the bucket (lazy.go); meta is
	// its metadata, read alone.
	evicted bool
	meta    blobtier.Meta
	first   uint64 // an evicted one's first event as its head says (lazyfirst.go); 0: unknown
	// digest is the xxh64 of the whole object as read (verify's check of
	// its index object, verifyindex.go), when intact (read).
	digest uint64
	read   bool
}

// segmentItems chooses what the segment phase reads. Hydrate reads the run
// of contiguous ids above the watermark plus the first segment after a hole
// (the probe): anything further cannot be part of the restored prefix.
// Verify reads every segment.
func (h *run) segmentItems() []*segItem {
	items := make([]*segItem, 0, len(h.p.segs))
	prev := h.p.mark.Segment
	for _, s := range h.p.segs {
		it := &segItem{segObj: s}
		items = append(items, it)
		if !h.collect && !h.p.follows(prev, s.id) {
			it.probe = true
			break
		}
		prev = s.id
	}
	return items
}

// fetchSegments reads, verifies and (in Hydrate) writes the items with at
// most h.conc objects in flight: each worker holds one object, writes its
// file as soon as it is verified (files are independent, and the store
// sees none of them until the directory is complete) and lets it go, so
// memory stays within the concurrency window however long the log is.
// Continuity across segments is checked from each segment's summary.
//
// In Hydrate the first problem in id order ends the phase early: a failed
// read or a sequence jump before item k stops the workers from starting
// items after k (what precedes k still matters, what follows cannot).
func (h *run) fetchSegments(ctx context.Context, items []*segItem) {
	chk := &orderChecker{p: h.p, items: items, prevID: h.p.mark.Segment, expectSeq: h.p.mark.Seq + 1}
	chk.stop.Store(int64(len(items)))
	bufs := newBufPool(items)
	g := new(errgroup.Group)
	g.SetLimit(h.conc)
	for i, it := range items {
		if ctx.Err() != nil || (!h.collect && int64(i) > chk.stop.Load()) {
			break
		}
		g.Go(func() error {
			if ctx.Err() != nil || (!h.collect && int64(i) > chk.stop.Load()) {
				return nil
			}
			if !it.evicted {
				h.fetchSegment(ctx, it, bufs)
			}
			if !h.collect {
				chk.finished(i)
			} else {
				chk.mu.Lock()
				it.done = true
				chk.mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // workers record their errors in their items
}

// fetchSegment reads one segment object (blobtier checks length and
// digest), verifies every frame (frame.VerifySegment's checks: magic,
// length, CRC, JSON, consecutive sequences; a frame.Verifier makes them as
// the bytes arrive, and its verdict counts once blobtier's checks passed),
// checks any tail objects that overlap it, and writes the file. The object
// is read into a buffer of bufs, given back on return.
func (h *run) fetchSegment(ctx context.Context, it *segItem, bufs *bufPool) {
	v := frame.NewVerifier(it.id, 0)
	data, meta, err := blobtier.GetWatched(ctx, h.r, it.key, bufs.get(), v)
	defer bufs.put(data)
	if err != nil {
		it.err = &ObjectError{Key: it.key, Err: err}
		it.damaged = errors.Is(err, blobtier.ErrCorrupt)
		return
	}
	h.read(len(data), -1)
	it.digest, it.read = meta.XXH64, true
	sum, err := v.Finish(data)
	if err != nil {
		it.err = &ObjectError{Key: it.key, Err: err}
		return
	}
	if data, sum, err = h.segmentLineage(it, meta.Epoch, data, sum); err != nil {
		it.err = &ObjectError{Key: it.key, Err: err}
		return
	}
	// An empty object is legitimate: a partial restore fills the ids above
	// its prefix with empty segments, and their owner may upload them. (A
	// truncation at rest cannot pass for one: blobtier checked the length
	// the metadata promised.)
	it.sum = sum
	if h.cons != nil && !it.probe {
		if it.cons, err = scanSegmentConsumers(data, sum, h.cons.split); err != nil {
			it.err = &ObjectError{Key: it.key, Err: err}
			return
		}
	}
	if sum.Events > 0 {
		h.compareTails(ctx, it, data)
	}
	if h.dir == "" || it.probe {
		return
	}
	if err := localseg.WriteSegmentFile(h.fsys, h.dir, it.id, data); err != nil {
		it.err = fmt.Errorf("coldload: write segment %d: %w", it.id, err)
		return
	}
	it.written = true
}

// compareTails checks every tail object overlapping the segment's sequences
// against the segment's frames, byte for byte, while the segment is in
// memory: an event present in both must be the same frame. A difference is
// two writers (a conflict naming both keys). Such tail objects are then
// superseded: the tail phase reads only what lies beyond the segments.
func (h *run) compareTails(ctx context.Context, it *segItem, data []byte) {
	lo := max(it.sum.FirstSeq, h.p.mark.Seq+1)
	hi := it.sum.LastSeq
	if lo > hi {
		return
	}
	overlapping := h.p.tailsOverlapping(lo, hi)
	if len(overlapping) == 0 {
		return
	}
	idx, err := eventIndex(data, it.sum.FirstSeq, it.sum.Events)
	if err != nil {
		h.fail(&ObjectError{Key: it.key, Err: err})
		return
	}
	for _, i := range overlapping {
		if ctx.Err() != nil {
			return
		}
		t := h.p.tails[i]
		tdata, meta, err := h.r.Get(ctx, t.key)
		if err != nil && !h.collect && errors.Is(err, blobtier.ErrCorrupt) {
			// A damaged tail object is the tail phase's to judge (doc.go):
			// passed over when intact objects hold its events, its error
			// when it held one no intact object holds. The segment holds
			// the overlap, so nothing is compared with it here.
			continue
		}
		if err != nil {
			h.fail(&ObjectError{Key: t.key, Err: err})
			continue
		}
		h.read(len(tdata), i)
		frames, err := decodeTail(t, tdata)
		if err != nil {
			h.fail(err)
			continue
		}
		// Only valid frames are compared: a stale writer's frames beyond
		// its cut are not the log's, whatever they hold.
		frames, valid := h.p.filterTail(t, meta.Epoch, frames)
		if !valid {
			h.zomb.tail(i)
			continue
		}
		for _, d := range frames {
			if d.f.Kind != frame.KindEvent || d.f.Seq < lo || d.f.Seq > hi {
				continue
			}
			r := idx[d.f.Seq-it.sum.FirstSeq]
			if !bytes.Equal(data[r[0]:r[1]], d.raw) {
				h.fail(&ConflictError{Seq: d.f.Seq, Key: it.key, OtherKey: t.key})
				break
			}
		}
	}
}

// orderChecker follows the items in id order as they finish and lowers stop
// to the first item that cannot extend the contiguous prefix.
type orderChecker struct {
	mu        sync.Mutex
	p         *plan
	items     []*segItem
	next      int
	prevID    uint64
	expectSeq uint64
	stop      atomic.Int64
	unknown   bool // evicted items passed: the next event only lies above
}

func (c *orderChecker) finished(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[i].done = true
	for c.next < len(c.items) && c.items[c.next].done {
		it := c.items[c.next]
		if it.damaged && c.p.follows(c.prevID, it.id) {
			// walkPrefix decides (damagedseg.go); the next segment tells
			// whether this one held events, so it is read too.
			c.prevID = it.id
			c.next++
			continue
		}
		bad := it.err != nil || !c.p.follows(c.prevID, it.id) ||
			(it.sum.Events > 0 && it.sum.FirstSeq != c.expectSeq && !(c.unknown && it.sum.FirstSeq > c.expectSeq))
		if bad {
			c.lower(int64(c.next))
			return
		}
		c.unknown = it.evicted || (c.unknown && it.sum.Events == 0)
		if it.sum.Events > 0 {
			c.expectSeq = it.sum.LastSeq + 1
		}
		c.prevID = it.id
		c.next++
	}
}

func (c *orderChecker) lower(k int64) {
	for {
		cur := c.stop.Load()
		if k >= cur || c.stop.CompareAndSwap(cur, k) {
			return
		}
	}
}

// prefixResult is what the hydrate walk over the segment items found.
type prefixResult struct {
	n       int    // items[:n] form the contiguous prefix
	lastSeq uint64 // last event sequence of the prefix (the watermark's when none)
	gap     *GapError
	// damagedLast: the last segment listed, damaged, follows the prefix;
	// the tail phase must reach shipped_through (damagedseg.go).
	damagedLast *segItem
	passed      []string // damaged segments passed over, in the prefix or after it
}

// walkPrefix walks the items in id order and returns the contiguous prefix:
// ids consecutive from the watermark segment + 1, sequences consecutive
// from the watermark sequence + 1. It stops at the first hole (returned as
// a gap) and returns the first read or verification error before it.
func (h *run) walkPrefix(ctx context.Context, items []*segItem) (prefixResult, error) {
	expectID, expectSeq := h.p.mark.Segment+1, h.p.mark.Seq+1
	prevKey := ""
	unknown := false // evicted items passed (lazy.go): their events are not known
	var passed []string
	for i, it := range items {
		if !h.p.follows(expectID-1, it.id) {
			g := &GapError{Shard: h.p.shard, FromSegment: expectID, ToSegment: it.id - 1,
				FromSeq: expectSeq, After: prevKey, Before: it.key}
			if it.done && it.err == nil && it.sum.Events > 0 {
				g.ToSeq = it.sum.FirstSeq - 1
			}
			h.markCovered(g)
			return prefixResult{n: i, lastSeq: expectSeq - 1, gap: g, passed: passed}, nil
		}
		if !it.done {
			if err := ctx.Err(); err != nil {
				return prefixResult{}, err
			}
			return prefixResult{}, fmt.Errorf("coldload: segment %s was not read", it.key)
		}
		if it.err != nil {
			switch h.passDamaged(items, i, expectSeq, unknown) {
			case passLast:
				return prefixResult{n: i, lastSeq: expectSeq - 1, damagedLast: it, passed: append(passed, it.key)}, nil
			case passEmpty:
				passed = append(passed, it.key)
				expectID, prevKey = it.id+1, it.key
				continue
			case passFull:
				return prefixResult{}, &errFull{"the damaged segment " + it.key + " follows segments left in the bucket"}
			}
			return prefixResult{}, it.err
		}
		if it.evicted {
			unknown, expectID, prevKey = true, it.id+1, it.key
			continue
		}
		if it.sum.Events > 0 && unknown && it.sum.FirstSeq > expectSeq {
			expectSeq, unknown = it.sum.FirstSeq, false
		}
		if it.sum.Events > 0 {
			if it.sum.FirstSeq < expectSeq {
				return prefixResult{}, &ObjectError{Key: it.key, Err: corruptf(
					"segment starts at sequence %d, but sequences through %d precede it", it.sum.FirstSeq, expectSeq-1)}
			}
			if it.sum.FirstSeq > expectSeq {
				g := &GapError{Shard: h.p.shard, FromSeq: expectSeq, ToSeq: it.sum.FirstSeq - 1, After: prevKey, Before: it.key}
				h.markCovered(g)
				return prefixResult{n: i, lastSeq: expectSeq - 1, gap: g, passed: passed}, nil
			}
		}
		if h.cons != nil {
			h.cons.addSegment(it.cons, expectSeq-1)
		}
		if it.sum.Events > 0 {
			expectSeq = it.sum.LastSeq + 1
		}
		expectID = it.id + 1
		prevKey = it.key
	}
	return prefixResult{n: len(items), lastSeq: expectSeq - 1, passed: passed}, nil
}

// markCovered notes in a gap whether tail objects cover its sequences.
func (h *run) markCovered(g *GapError) {
	if g.ToSeq >= g.FromSeq && g.ToSeq != 0 {
		g.CoveredByTail = h.p.tailCoverage(g.FromSeq) >= g.ToSeq
	}
}
