package shipper

import (
	"context"

	"github.com/bucketlog/bucketlog/watermark"
)

// checkCleanupFence is the fence check of tail cleanup (docs/FORMAT.md,
// "Writer fencing": GC and the watermark): with fencing, a pass HEADs the
// next epoch's claim after the segments it counts as durable were read
// back and before it commits or deletes anything. Absent: every segment
// counted was in the bucket before any newer claim, so a newer owner's cut
// ends our epoch at or above the contiguous durable end, and its own tail
// objects (which start above its cut) all lie above what the pass deletes.
// Present: the writer is fenced and deletes nothing. A HEAD error fails
// the pass, which is retried.
func (s *Shipper) checkCleanupFence(ctx context.Context) error {
	if err := s.checkFence(ctx); err != nil {
		s.mu.Lock()
		s.cleanupDirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}

// cleanupBound returns what tail cleanup may delete through: the committed
// rw.durable_seq (docs/FORMAT.md §6.5), never a purely local mark. local is
// this writer's contiguous durable end. When it is above the durable end
// this process last read or wrote, the pass first commits it by
// compare-and-swap through the epoch guard (a takeover bumped rw's epoch, so
// a stale writer's commit fails fenced and the pass deletes nothing);
// otherwise it costs no request, since the committed value never moves
// backward. The bound is min(local, committed): a committed value is at most
// its writer's lineage's durable end, so deleting at or below it never
// removes the only copy of an acknowledged event, whoever deletes.
//
// On a bucket without compare-and-swap no rw is kept (shared GC is refused
// there and the writer runs unfenced at epoch 0): the local mark is the
// bound, as before durable_seq.
func (s *Shipper) cleanupBound(ctx context.Context, local uint64) (uint64, error) {
	if !s.b.CanCAS() {
		return local, nil
	}
	s.mu.Lock()
	known := s.wm.Durable()
	s.mu.Unlock()
	if local <= known {
		return local, nil
	}
	m, err := watermark.AdvanceDurable(ctx, s.b, s.shard, local)
	if watermark.Damaged(err) {
		// As GC does (gcLocked): the owner rewrites a damaged rw with its
		// local reclaim base, and with its own durable end (just checked
		// against the next claim) as durable_seq, so a damaged rw does not
		// stop tail cleanup until the next GC pass or start.
		snap, serr := s.store.Snapshot()
		if serr != nil {
			return 0, serr
		}
		s.log.Error("the reclaim watermark is damaged; rewriting it with the local reclaim base", "err", err,
			"seq", snap.ReclaimedSeq, "segment", snap.ReclaimedSeg, "durable_seq", local)
		m, err = watermark.Repair(ctx, s.b, s.shard, snap.ReclaimedSeq, snap.ReclaimedSeg, max(local, known))
	}
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if m.Seq >= s.wm.Seq && m.Durable() >= s.wm.Durable() {
		s.wm = m
	}
	s.mu.Unlock()
	return min(local, m.Durable()), nil
}
