package shipper

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

// GCReport explains one reclaim pass: what it removed and what holds the
// boundary where it is.
type GCReport struct {
	Shard          int                    `json:"shard"`
	Outcome        string                 `json:"outcome"` // reclaimed | noop | fenced
	Plan           reclaim.Plan           `json:"plan"`
	Local          localseg.ReclaimResult `json:"local"`
	Shared         *reclaim.SharedResult  `json:"shared,omitempty"`
	SegmentsBefore int                    `json:"segments_before"`
	SegmentsAfter  int                    `json:"segments_after"`
	Base           uint64                 `json:"base"`
	Tip            uint64                 `json:"tip"`
}

// GC runs one explicit shared reclaim pass now (docs/FORMAT.md §8.3): only segments
// durable in the bucket go, the watermark is committed first, and bucket
// objects at or below it are deleted after the local reclaim. sweep lists
// the shard's objects and deletes every one the watermark covers.
func (s *Shipper) GC(ctx context.Context, pol reclaim.Policy, sweep bool) (GCReport, error) {
	s.maint.Lock()
	defer s.maint.Unlock()
	return s.gcLocked(ctx, pol, true, sweep)
}

// reclaimable is the durable rule GC plans with: a segment durable in the
// bucket and, with tail replication, whose events the cursor object's
// shipped_through covers. The cursor object is a restore's witness of the
// watermark (docs/FORMAT.md §9.1): once the segments below it are gone and
// the tails cleaned, it may be the only object that says the reclaimed
// sequences existed, so the watermark never passes it (a failing cursor
// write holds GC back, never the data).
func (s *Shipper) reclaimable(snap localseg.Snapshot) func(id uint64) bool {
	if !s.tailOn {
		return s.isDurable
	}
	covered := s.repl.CursorShipped()
	last := make(map[uint64]uint64, len(snap.Segments))
	for _, seg := range snap.Segments {
		last[seg.ID] = seg.LastSeq
	}
	return func(id uint64) bool { return s.isDurable(id) && last[id] <= covered }
}

// coverWatermarkWitness writes the cursor object before a GC that could
// reclaim past its shipped_through (the segments became durable after the
// last pass wrote it, or a failing tail kept it back while the uploader
// moved the shipped position over durable segments), so the watermark
// keeps its witness and GC still makes progress. A failed write leaves
// reclaimable to hold the watermark at the object's old position.
func (s *Shipper) coverWatermarkWitness(ctx context.Context) {
	if s.cursorHeld() {
		return
	}
	durable, _ := s.contiguous()
	if durable <= s.repl.CursorShipped() {
		return
	}
	// Everything through the contiguous durable end is in the bucket: the
	// shipped position may stand there (as the uploader moves it).
	s.advance(durable)
	if _, _, err := s.repl.SyncCursorIfDue(ctx, s.store, s.b); err != nil {
		s.m.CursorWriteFailed.Inc()
		s.log.Warn("the cursor object could not be written before GC; GC keeps the watermark at its shipped_through", "err", err)
	}
}

// gcLocked runs a pass; the caller holds the maintenance lock.
func (s *Shipper) gcLocked(ctx context.Context, pol reclaim.Policy, explicit, sweep bool) (rep GCReport, err error) {
	rep.Shard = int(s.shard)
	defer func() {
		// A write or fsync error inside the reclaim poisons the store:
		// readiness must see it now, not at the next append.
		s.noteErr(err)
		switch {
		case err != nil:
			s.m.GCError.Inc()
		case rep.Outcome == "reclaimed":
			s.m.GCReclaimed.Inc()
		default:
			s.m.GCNoop.Inc()
		}
	}()
	before, err := s.store.Snapshot()
	if err != nil {
		return rep, err
	}
	rep.SegmentsBefore = len(before.Segments)
	defer func() {
		if after, serr := s.store.Snapshot(); serr == nil {
			rep.SegmentsAfter = len(after.Segments)
			rep.Base = after.ReclaimedSeq + 1
			rep.Tip = after.Tip
		}
	}()

	if err := s.stopped(); err != nil {
		return rep, err
	}
	// Plan locally first: a pass with nothing to remove issues no bucket
	// request, so an idle shard stays silent.
	if s.tailOn && !reclaim.MakePlan(before, pol, s.isDurable).Empty() {
		s.coverWatermarkWitness(ctx)
	}
	mayReclaim := s.reclaimable(before)
	rep.Plan = reclaim.MakePlan(before, pol, mayReclaim)
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
	res, err := reclaim.SharedWith(ctx, s.store, s.b, s.shard, reclaim.Owner, pol, mayReclaim, opts)
	if watermark.Damaged(err) {
		// A damaged watermark object would stop GC for good: the owner
		// rewrites it with its local base (see watermark.Repair), then
		// runs the pass again.
		s.log.Error("the reclaim watermark is damaged; rewriting it with the local reclaim base", "err", err,
			"seq", before.ReclaimedSeq, "segment", before.ReclaimedSeg)
		s.mu.Lock()
		durable := s.wm.Durable() // the highest committed durable end this process knows
		s.mu.Unlock()
		if _, rerr := watermark.Repair(ctx, s.b, s.shard, before.ReclaimedSeq, before.ReclaimedSeg, durable); rerr != nil {
			return rep, errors.Join(err, rerr)
		}
		res, err = reclaim.SharedWith(ctx, s.store, s.b, s.shard, reclaim.Owner, pol, mayReclaim, reclaim.SharedOptions{})
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
	s.m.TailObjectsReclaimed.Add(float64(res.Deleted.Tails))
	s.m.TailReclaimFailed.Add(float64(res.Deleted.Failed))
	if ferr := s.Fenced(); ferr != nil {
		// A newer owner fenced this writer during the pass (its deletes
		// under that owner's watermark were refused): the pass answers
		// fenced, not reclaimed, and no later pass retries them here.
		rep.Outcome = "fenced"
		return rep, ferr
	}
	if res.Deleted.Failed > 0 {
		s.log.Warn("some bucket deletes failed; the next pass retries them", "failed", res.Deleted.Failed, "errors", res.Deleted.Errors)
	}
	if len(res.Local.Removed) > 0 || len(res.Adopted.Removed) > 0 || res.Deleted.Segments > 0 || res.Deleted.Tails > 0 {
		rep.Outcome = "reclaimed"
		s.log.Info("reclaimed segments", "watermark_seq", res.Watermark.Seq, "watermark_segment", res.Watermark.Segment,
			"removed_local", len(res.Local.Removed), "deleted_objects", res.Deleted.Segments+res.Deleted.Tails, "reason", res.Plan.Reason)
	} else {
		rep.Outcome = "noop"
	}
	return rep, nil
}
