package shipper

import "context"

// checkCleanupFence is the fence check of tail cleanup (docs/FORMAT.md,
// "Writer fencing": GC and the watermark): with fencing, a pass HEADs the
// next epoch's claim after the segments it counts as durable were read
// back and before it deletes anything. Absent: every segment counted was
// in the bucket before any newer claim, so a newer owner's cut ends our
// epoch at or above the contiguous durable end, and its own tail objects
// (which start above its cut) all lie above what the pass deletes. Present:
// the writer is fenced and deletes nothing (a stale writer's background
// pass ships no tail, so without this no HEAD would precede its deletes,
// and its local durable end, counting its seals beyond the cut, would
// delete the new owner's acknowledged tail objects). A HEAD error fails
// the pass, which is retried.
//
// This bounds cleanup by a checked local mark; the committed
// rw.durable_seq of FENCING.md is not kept yet.
func (s *Shipper) checkCleanupFence(ctx context.Context) error {
	if err := s.checkFence(ctx); err != nil {
		s.mu.Lock()
		s.cleanupDirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}
