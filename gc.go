package bucketlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/watermark"
)

// sweepEvery bounds how many periodic GC passes delete by key before one
// lists the shard's objects again.
const sweepEvery = 16

// GCRequest is an operator's explicit reclaim request: it runs with
// consumer interest, plus keep-last-N when MaxRetainedSegments is set,
// whatever the configured default.
type GCRequest struct {
	MinRetainedSegments int
	MaxRetainedSegments int
	// Sweep lists the shard's bucket objects and deletes every one the
	// watermark covers, leftovers of earlier passes included (the gc
	// command does). Without it, a pass after a complete sweep deletes only
	// what it newly covers, by key, and costs what it removes rather than
	// the history the bucket keeps.
	Sweep bool
}

// GCReport explains one reclaim pass: what it removed and what holds the
// boundary where it is.
type GCReport struct {
	Shard          int                    `json:"shard"`
	Outcome        string                 `json:"outcome"` // reclaimed | noop
	Plan           reclaim.Plan           `json:"plan"`
	Local          localseg.ReclaimResult `json:"local"`
	Shared         *reclaim.SharedResult  `json:"shared,omitempty"`
	SegmentsBefore int                    `json:"segments_before"`
	SegmentsAfter  int                    `json:"segments_after"`
	Base           uint64                 `json:"base"`
	Tip            uint64                 `json:"tip"`
}

// GC runs one reclaim pass now (SPEC §6). On a store that ships, it is the
// shared reclaim: only segments durable in the bucket go, the watermark is
// committed first, and bucket objects at or below it are deleted after the
// local reclaim.
func (l *Log) GC(ctx context.Context, req GCRequest) (GCReport, error) {
	if err := l.writable(); err != nil {
		return GCReport{}, err
	}
	pol := reclaim.Policy{Enabled: true, MinRetainedSegments: req.MinRetainedSegments, MaxRetainedSegments: req.MaxRetainedSegments}
	if l.ship != nil {
		l.ship.maint.Lock()
		defer l.ship.maint.Unlock()
	}
	return l.gcLocked(ctx, pol, true, req.Sweep)
}

// policy is the configured periodic policy.
func (l *Log) policy() reclaim.Policy {
	g := l.opts.GC
	return reclaim.Policy{Enabled: g.Enabled, MinRetainedSegments: g.MinRetainedSegments, MaxRetainedSegments: g.MaxRetainedSegments}
}

// gcLocked runs a pass; the caller holds the shipper's maintenance lock
// when there is a shipper.
func (l *Log) gcLocked(ctx context.Context, pol reclaim.Policy, explicit, sweep bool) (rep GCReport, err error) {
	rep.Shard = l.own.Index
	defer func() {
		// A write or fsync error inside the reclaim poisons the store:
		// readiness must see it now, not at the next append.
		l.noteErr(err)
		switch {
		case err != nil:
			l.m.GCError.Inc()
		case rep.Outcome == "reclaimed":
			l.m.GCReclaimed.Inc()
		default:
			l.m.GCNoop.Inc()
		}
	}()
	if l.ship == nil {
		if url, ships := ShipsToBucket(l.dir); ships {
			return rep, usagef("shard directory %s ships to %s: GC needs that bucket", l.dir, url)
		}
	}
	before, err := l.store.Snapshot()
	if err != nil {
		return rep, err
	}
	rep.SegmentsBefore = len(before.Segments)
	defer func() {
		if after, serr := l.store.Snapshot(); serr == nil {
			rep.SegmentsAfter = len(after.Segments)
			rep.Base = after.ReclaimedSeq + 1
			rep.Tip = after.Tip
		}
	}()

	if l.ship == nil {
		rep.Plan, rep.Local, err = reclaim.Pass(l.store, pol, nil)
		if err != nil {
			return rep, err
		}
		if !rep.Plan.Empty() {
			rep.Outcome = "reclaimed"
			l.log.Info("reclaimed segments", "through_segment", rep.Local.ThroughSegment, "through_seq", rep.Local.ThroughSeq, "removed", len(rep.Local.Removed), "reason", rep.Plan.Reason)
		} else {
			rep.Outcome = "noop"
		}
		return rep, nil
	}

	s := l.ship
	if err := s.stopped(); err != nil {
		return rep, err
	}
	// Plan locally first: a pass with nothing to remove issues no bucket
	// request, so an idle shard stays silent.
	rep.Plan = reclaim.MakePlan(before, pol, s.isDurable)
	if rep.Plan.Empty() && !explicit {
		rep.Outcome = "noop"
		return rep, nil
	}
	// After a complete sweep, a periodic pass deletes what it newly covers
	// by key and does not list the history the bucket keeps. It sweeps
	// after a start, after any failure, every sweepEvery passes, and when
	// asked to.
	s.mu.Lock()
	opts := reclaim.SharedOptions{ByKey: !sweep && s.sweptClean && s.byKeyPasses < sweepEvery}
	if opts.ByKey {
		s.byKeyPasses++
	} else {
		s.byKeyPasses = 0
	}
	s.sweptClean = false
	s.mu.Unlock()
	res, err := reclaim.SharedWith(ctx, l.store, s.b, s.shard, reclaim.Owner, pol, s.isDurable, opts)
	if watermark.Damaged(err) {
		// A damaged watermark object would stop GC for good: the owner
		// rewrites it with its local base (see watermark.Repair), then
		// runs the pass again.
		l.log.Error("the reclaim watermark is damaged; rewriting it with the local reclaim base", "err", err,
			"seq", before.ReclaimedSeq, "segment", before.ReclaimedSeg)
		if _, rerr := watermark.Repair(ctx, s.b, s.shard, before.ReclaimedSeq, before.ReclaimedSeg); rerr != nil {
			return rep, errors.Join(err, rerr)
		}
		res, err = reclaim.SharedWith(ctx, l.store, s.b, s.shard, reclaim.Owner, pol, s.isDurable, reclaim.SharedOptions{})
	}
	if errors.Is(err, blobtier.ErrUnsupported) {
		return rep, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err != nil {
		return rep, err
	}
	rep.Shared = &res
	rep.Plan = res.Plan
	rep.Local = res.Local
	s.mu.Lock()
	s.sweptClean = res.Deleted.Failed == 0
	s.wm = res.Watermark
	for id := range s.durable {
		if id <= res.Watermark.Segment {
			delete(s.durable, id)
		}
	}
	s.mu.Unlock()
	// Everything through the new base is in the bucket (only durable
	// segments are reclaimed): the tail must not be left below it.
	if seq, _ := s.contiguous(); seq > 0 {
		s.advance(seq)
	}
	l.m.TailObjectsReclaimed.Add(float64(res.Deleted.Tails))
	l.m.TailReclaimFailed.Add(float64(res.Deleted.Failed))
	if res.Deleted.Failed > 0 {
		l.log.Warn("some bucket deletes failed; the next pass retries them", "failed", res.Deleted.Failed, "errors", res.Deleted.Errors)
	}
	if len(res.Local.Removed) > 0 || len(res.Adopted.Removed) > 0 || res.Deleted.Segments > 0 || res.Deleted.Tails > 0 {
		rep.Outcome = "reclaimed"
		l.log.Info("reclaimed segments", "watermark_seq", res.Watermark.Seq, "watermark_segment", res.Watermark.Segment,
			"removed_local", len(res.Local.Removed), "deleted_objects", res.Deleted.Segments+res.Deleted.Tails, "reason", res.Plan.Reason)
	} else {
		rep.Outcome = "noop"
	}
	return rep, nil
}
