package coldload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bucketlog/bucketlog/blobtier"
)

// VerifyOptions choose what Verify walks.
//
// blobtier.Bucket lists one shard and kind at a time and has no listing of
// the whole bucket, so Verify cannot discover shards by itself: it walks
// Shards, or shards 0..ShardCount-1, or shard 0 alone when neither is set.
// Every shard walked is named in the report, so a verify that missed a
// shard cannot pass for one that checked it.
type VerifyOptions struct {
	Shards      []uint32
	ShardCount  int
	Concurrency int // objects read at once (default 8)
	Progress    func(Progress)
	Now         func() time.Time
}

// Problem classes.
const (
	ProblemCorrupt  = "corrupt"  // length, digest, frame, or content that disagrees with its key
	ProblemGap      = "gap"      // missing segment ids or sequences
	ProblemConflict = "conflict" // two objects differ for one sequence
	ProblemCursor   = "cursor"   // the cursor object points past what the bucket holds
	ProblemMissing  = "missing"  // listed, then not found
	ProblemIO       = "io"       // a read failed
	// ProblemWatermark: the watermark claims more than the objects support
	// (ErrWatermarkAhead).
	ProblemWatermark = "watermark"
	// ProblemLineage: the start records do not form a chain (ErrLineage):
	// nothing else of the shard can be judged.
	ProblemLineage = "lineage"
)

// Problem is one finding of Verify.
type Problem struct {
	Shard  uint32 `json:"shard"`
	Class  string `json:"class"`
	Key    string `json:"key,omitempty"`
	Detail string `json:"detail"`
}

// ShardReport is what Verify found for one shard.
type ShardReport struct {
	Shard   uint32 `json:"shard"`
	Present bool   `json:"present"` // the bucket holds some object for it
	// Base and BaseSegment are the watermark.
	Base        uint64 `json:"base"`
	BaseSegment uint64 `json:"base_segment"`
	Segments    int    `json:"segments"`
	TailObjects int    `json:"tail_objects"`
	// Through is the highest sequence the bucket holds contiguously from
	// the base (what a restore would reach).
	Through            uint64   `json:"through"`
	ShippedThrough     uint64   `json:"shipped_through"`
	Consumers          int      `json:"consumers"`
	OrphanSegments     int      `json:"orphan_segments"`
	TailBelowWatermark int      `json:"tail_objects_below_watermark"`
	TailSuperseded     int      `json:"tail_objects_superseded"`
	Unparsed           []string `json:"unparsed_keys"`
	Problems           int      `json:"problems"`
	Fenced                      // zombie_objects and the lineage followed (lineage.go)
	IndexReport                 // the index objects (verifyindex.go)
}

// VerifyReport is the outcome of Verify. The bucket is sound when Problems
// is empty.
type VerifyReport struct {
	Shards   []ShardReport `json:"shards"`
	Objects  int           `json:"objects"`
	Bytes    int64         `json:"bytes"`
	Seconds  float64       `json:"seconds"`
	Problems []Problem     `json:"problems"`
}

// OK reports that no problem was found.
func (r VerifyReport) OK() bool { return len(r.Problems) == 0 }

// Verify checks the bucket's objects of the chosen shards without writing
// anything anywhere: every segment and tail object's length and digest
// (blobtier.Get) and frames (magic, CRC, JSON, consecutive sequences), tail
// objects' content against their keys, segment ids contiguous above the
// watermark and sequences continuing across them, tail objects extending
// the segments without holes, overlapping objects identical byte for byte,
// and the cursor object within what the bucket holds. Every problem is
// listed; the error is for a verify that could not run (a listing failed,
// ctx ended).
func Verify(ctx context.Context, b Reader, opts VerifyOptions) (VerifyReport, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	conc := opts.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	shards := slices.Clone(opts.Shards)
	if len(shards) == 0 {
		for s := range max(opts.ShardCount, 1) {
			shards = append(shards, uint32(s))
		}
	}
	slices.Sort(shards)
	shards = slices.Compact(shards)
	var rep VerifyReport
	prog := &progress{fn: opts.Progress}
	for _, shard := range shards {
		sr, problems, reads, readBytes, err := verifyShard(ctx, b, shard, conc, prog)
		rep.Objects += reads
		rep.Bytes += readBytes
		if err != nil {
			rep.Seconds = now().Sub(start).Seconds()
			return rep, err
		}
		sr.Problems = len(problems)
		rep.Shards = append(rep.Shards, sr)
		rep.Problems = append(rep.Problems, problems...)
	}
	rep.Seconds = now().Sub(start).Seconds()
	return rep, nil
}

func verifyShard(ctx context.Context, b Reader, shard uint32, conc int, prog *progress) (ShardReport, []Problem, int, int64, error) {
	sr := ShardReport{Shard: shard}
	p, err := makePlan(ctx, b, shard)
	if err != nil {
		var oe *ObjectError
		if (errors.As(err, &oe) || errors.Is(err, ErrLineage)) && ctx.Err() == nil {
			// The watermark or cursor object is unreadable: without the base
			// nothing else can be judged.
			sr.Present = true
			return sr, []Problem{problemOf(shard, err)}, 0, 0, nil
		}
		return sr, nil, 0, 0, err
	}
	sr.Present = !p.empty()
	sr.Unparsed, sr.Lineage = p.unparsed, ReportLineage(p.lin)
	if !sr.Present {
		return sr, nil, 0, 0, nil
	}
	sr.Base, sr.BaseSegment = p.mark.Seq, p.mark.Segment
	sr.OrphanSegments, sr.TailBelowWatermark = p.orphanSegs, p.orphanTails
	sr.ShippedThrough, sr.Consumers = p.cursor.ShippedThrough, len(p.cursor.Consumers)
	reads := 0
	if p.hasMark {
		reads++
	}
	if p.hasCursor || p.cursorErr != nil {
		reads++
	}

	h := &run{r: b, p: p, collect: true, conc: conc, prog: prog, seen: make([]atomic.Bool, len(p.tails)), zomb: newZombies(p)}
	if e := p.checkWatermark(ctx, b); e != nil {
		h.fail(e)
	}
	if p.cursorErr != nil {
		// A damaged cursor object is a problem of its own; the rest of the
		// shard can still be judged (a restore goes on without it too).
		h.fail(p.cursorErr)
	}
	items := h.segmentItems()
	sr.Segments = len(items)
	sr.TailObjects = len(p.tails)
	h.fetchSegments(ctx, items)
	if err := ctx.Err(); err != nil {
		return sr, nil, reads + int(h.reads.Load()), h.readBytes.Load(), err
	}

	// Segments in id order: every hole and overlap, resuming after each.
	expectID, expectSeq := p.mark.Segment+1, p.mark.Seq+1
	known, contiguous := true, true
	through := p.mark.Seq
	prevKey := ""
	for _, it := range items {
		after := prevKey
		if !p.follows(expectID-1, it.id) {
			g := &GapError{Shard: shard, FromSegment: expectID, ToSegment: it.id - 1, FromSeq: expectSeq, After: after, Before: it.key}
			if it.err == nil && it.sum.Events > 0 && known {
				g.ToSeq = it.sum.FirstSeq - 1
			}
			h.markCovered(g)
			h.fail(g)
			// The same hole shows in the sequences: report it once.
			contiguous, known = false, false
		}
		expectID, prevKey = it.id+1, it.key
		if it.err != nil {
			h.fail(it.err)
			contiguous, known = false, false
			continue
		}
		if it.sum.Events == 0 {
			continue
		}
		if known && it.sum.FirstSeq > expectSeq {
			g := &GapError{Shard: shard, FromSeq: expectSeq, ToSeq: it.sum.FirstSeq - 1, After: after, Before: it.key}
			h.markCovered(g)
			h.fail(g)
			contiguous = false
		} else if known && it.sum.FirstSeq < expectSeq {
			h.fail(&ObjectError{Key: it.key, Err: corruptf("segment starts at sequence %d, but sequences through %d precede it",
				it.sum.FirstSeq, expectSeq-1)})
			contiguous = false
		}
		expectSeq, known = it.sum.LastSeq+1, true
		if contiguous {
			through = it.sum.LastSeq
		}
	}

	// Tail objects beyond the segments, in order.
	segEnd := expectSeq - 1
	tr, err := h.tailPhase(ctx, segEnd, false, nil)
	if err != nil {
		return sr, nil, reads + int(h.reads.Load()), h.readBytes.Load(), err
	}
	sr.TailSuperseded = tr.superseded
	if contiguous {
		through = tr.cursor
		if len(tr.gaps) > 0 {
			through = tr.gaps[0].FromSeq - 1
		}
	} else {
		through = max(through, p.tailCoverage(through+1))
	}
	sr.Through = through

	// Tail objects no segment met and the tail phase skipped (inside a hole
	// between segments) still get a check of their own.
	g := new(errgroup.Group)
	g.SetLimit(conc)
	for i, t := range p.tails {
		if h.seen[i].Load() || t.last > segEnd {
			continue
		}
		g.Go(func() error {
			data, meta, err := b.Get(ctx, t.key)
			if err != nil && errors.Is(err, blobtier.ErrCorrupt) && h.damagedZombie(ctx, i) {
				return nil // a stale writer's, whatever its bytes: counted as a zombie
			}
			if err != nil {
				h.fail(&ObjectError{Key: t.key, Err: err})
				return nil
			}
			h.read(len(data), i)
			frames, err := decodeTail(t, data)
			if err != nil {
				h.fail(err)
			} else if _, valid := p.filterTail(t, meta.Epoch, frames); !valid {
				h.zomb.tail(i)
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return sr, nil, reads + int(h.reads.Load()), h.readBytes.Load(), err
	}

	if sr.IndexReport, err = h.verifyIndexes(ctx, shard, items); err != nil {
		return sr, nil, reads + int(h.reads.Load()), h.readBytes.Load(), err
	}

	// The cursor object must not point past what the bucket holds.
	if p.hasCursor {
		key := blobtier.CursorKey(shard)
		if p.cursor.ShippedThrough > through {
			h.fail(&cursorProblem{key: key, msg: fmt.Sprintf("shipped_through %d is beyond what the bucket holds contiguously (%d)",
				p.cursor.ShippedThrough, through)})
		}
		for _, name := range slices.Sorted(maps.Keys(p.cursor.Consumers)) {
			if c := p.cursor.Consumers[name]; c > p.cursor.ShippedThrough {
				h.fail(&cursorProblem{key: key, msg: fmt.Sprintf("consumer %q at %d is beyond shipped_through %d",
					name, c, p.cursor.ShippedThrough)})
			}
		}
	}

	problems := make([]Problem, 0, len(h.fatal))
	for _, e := range h.fatal {
		problems = append(problems, problemOf(shard, e))
	}
	// Segments are read in parallel: order the findings by key so two runs
	// over the same bucket print the same report.
	slices.SortStableFunc(problems, func(a, b Problem) int { return strings.Compare(a.Key, b.Key) })
	sr.ZombieObjects, sr.HighestSegmentID = h.zomb.count(p.gapSegs), p.maxSegID
	return sr, problems, reads + int(h.reads.Load()), h.readBytes.Load(), nil
}

// cursorProblem is a finding about the cursor object.
type cursorProblem struct{ key, msg string }

func (c *cursorProblem) Error() string { return "coldload: cursor object " + c.key + ": " + c.msg }

// problemOf classifies an error found by Verify.
func problemOf(shard uint32, err error) Problem {
	p := Problem{Shard: shard, Detail: err.Error(), Class: ProblemIO}
	var (
		we *WatermarkAheadError
		ge *GapError
		ce *ConflictError
		oe *ObjectError
		cp *cursorProblem
	)
	switch {
	case errors.Is(err, ErrLineage):
		p.Class = ProblemLineage
	case errors.As(err, &we):
		p.Class, p.Key = ProblemWatermark, blobtier.WatermarkKey(we.Shard)
	case errors.As(err, &ce):
		p.Class, p.Key = ProblemConflict, ce.OtherKey
	case errors.As(err, &ge):
		p.Class, p.Key = ProblemGap, ge.Before
	case errors.As(err, &cp):
		p.Class, p.Key = ProblemCursor, cp.key
	case errors.As(err, &oe):
		p.Key = oe.Key
		switch {
		case errors.Is(err, ErrCorrupt):
			p.Class = ProblemCorrupt
		case errors.Is(err, blobtier.ErrNotFound):
			p.Class = ProblemMissing
		}
	}
	return p
}
