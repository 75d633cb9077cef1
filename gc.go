package bucketlog

import (
	"context"

	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/shipper"
)

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
type GCReport = shipper.GCReport

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
		return l.ship.GC(ctx, pol, req.Sweep)
	}
	return l.localGC(pol)
}

// policy is the configured periodic policy.
func (l *Log) policy() reclaim.Policy {
	g := l.opts.GC
	return reclaim.Policy{Enabled: g.Enabled, MinRetainedSegments: g.MinRetainedSegments, MaxRetainedSegments: g.MaxRetainedSegments}
}

// localGC is a reclaim pass of a store without a bucket (the shipper runs
// the shared pass of a store that ships).
func (l *Log) localGC(pol reclaim.Policy) (rep GCReport, err error) {
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
	if url, ships := ShipsToBucket(l.dir); ships {
		return rep, usagef("shard directory %s ships to %s: GC needs that bucket", l.dir, url)
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
