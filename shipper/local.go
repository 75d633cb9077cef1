package shipper

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/bucketlog/bucketlog/metrics"
	"github.com/bucketlog/bucketlog/reclaim"
)

// Local runs GC for a store without a bucket: the local reclaim pass, and
// its periodic loop (Options' Policy, GCInterval, Logger, Metrics and
// NoteErr apply; the rest is unused).
type Local struct {
	store Store
	o     Options
	log   *slog.Logger
	m     *metrics.Shard
}

// NewLocal returns the GC of a store that does not ship.
func NewLocal(store Store, o Options) *Local {
	if o.NoteErr == nil {
		o.NoteErr = func(error) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics, _ = metrics.New(nil, int(o.Shard))
	}
	return &Local{store: store, o: o, log: o.Logger, m: o.Metrics}
}

// Start runs the periodic GC until ctx ends, when Policy and GCInterval
// ask for one: seal what is due by age (only sealed segments can be
// reclaimed), then reclaim.
func (l *Local) Start(ctx context.Context, wg *sync.WaitGroup) {
	if !l.o.Policy.Enabled || l.o.GCInterval <= 0 {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(l.o.GCInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := l.store.SealIfDue(); err != nil {
				l.o.NoteErr(err)
				l.log.Error("seal by age failed", "err", err)
				continue
			}
			if _, err := l.GC(l.o.Policy); err != nil {
				l.log.Error("periodic GC failed", "err", err)
			}
		}
	}()
}

// GC runs one local reclaim pass with pol.
func (l *Local) GC(pol reclaim.Policy) (rep GCReport, err error) {
	rep.Shard = int(l.o.Shard)
	defer func() { l.count(rep, err) }()
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

// Refused counts a pass refused before it started.
func (l *Local) Refused(err error) (GCReport, error) {
	rep := GCReport{Shard: int(l.o.Shard)}
	l.count(rep, err)
	return rep, err
}

// count notes a pass: a write or fsync error inside the reclaim poisons the
// store, and readiness must see it now, not at the next append.
func (l *Local) count(rep GCReport, err error) {
	if err != nil {
		l.o.NoteErr(err)
	}
	switch {
	case err != nil:
		l.m.GCError.Inc()
	case rep.Outcome == "reclaimed":
		l.m.GCReclaimed.Inc()
	default:
		l.m.GCNoop.Inc()
	}
}
