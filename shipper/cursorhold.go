package shipper

import (
	"context"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// cursorHold is a damaged cursor object that start-up did not rebuild yet
// (docs/FORMAT.md §6.6): segment objects of ours read back damaged, and
// the rebuilt shipped_through must count them (it never moves backward
// over the value the damage lost), but it must not vouch for them before
// they are in the bucket intact again. A start trusts shipped_through for
// the segments below it and does not read them back (verifiedBefore); a
// rebuilt object written before the put again would leave a damaged
// segment counted durable by every later start, once the process stopped
// before the uploader put it. So the damaged object stays until every
// segment in segs is durable (put again and read back) or reclaimed: until
// then every start reads the segments back, and no pass writes the cursor
// object (tailbatch.Hooks.HoldCursor).
//
// The same holds for tail objects of ours read back damaged at start
// whose events lie above the position start-up could verify: the floor
// counts them, so the object waits until the replicator shipped through
// tails (their events put again in objects read back intact, or in
// durable segments) or GC reclaimed them.
type cursorHold struct {
	floor uint64   // the rebuilt shipped_through, counting segs and the damaged tails
	segs  []uint64 // segment ids read back damaged at start
	tails uint64   // the highest last sequence of a damaged tail object above the verified position (0: none)
}

// heldTails is the highest last sequence of the damaged tail objects
// (keys) above shipped, the position start-up verified without them; 0
// when there is none.
func heldTails(damaged map[string]bool, shipped uint64) uint64 {
	var top uint64
	for key := range damaged {
		if k, err := blobtier.ParseKey(key); err == nil && k.LastSeq > shipped {
			top = max(top, k.LastSeq)
		}
	}
	return top
}

// cursorHeld reports whether the cursor object is held back.
func (s *Shipper) cursorHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hold != nil
}

// releaseCursor rebuilds the held cursor object once every held segment
// is durable or reclaimed and the held tails' events are shipped again: at least the floor start-up computed and the
// shipped position, with the store's consumers. It is a no-op when nothing
// is held or a held segment still awaits its put; a failed write keeps the
// hold, and a later pass tries again.
func (s *Shipper) releaseCursor(ctx context.Context) error {
	if !s.cursorHeld() {
		return nil
	}
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	snap, err := s.store.Snapshot()
	if err != nil {
		return err
	}
	s.mu.Lock()
	h := s.hold
	ready := h != nil
	for i := 0; ready && i < len(h.segs); i++ {
		ready = h.segs[i] <= snap.ReclaimedSeg || s.durable[h.segs[i]]
	}
	if ready && h.tails > snap.ReclaimedSeq {
		ready = s.repl.ShippedThrough() >= h.tails
	}
	s.mu.Unlock()
	if !ready {
		return nil
	}
	// The shipped position before the consumers' snapshot (the order
	// syncCursorIfDue keeps): the snapshot is no older than its frame.
	through := max(h.floor, s.repl.ShippedThrough())
	if snap, err = s.store.Snapshot(); err != nil {
		return err
	}
	c, err := tailbatch.WriteCursorDeleted(ctx, s.b, s.shard, through, snap.Consumers, snap.Deleted, snap.Tip)
	if err != nil {
		return fmt.Errorf("rebuild the damaged cursor object: %w", err)
	}
	s.repl.KnowCursor(snap.Consumers, c.ShippedThrough)
	s.mu.Lock()
	s.hold = nil
	s.mu.Unlock()
	s.log.Error("the cursor object was damaged; rebuilt from the owner's state once the damaged segments were put again", "key", blobtier.CursorKey(s.shard),
		"shipped_through", c.ShippedThrough, "consumers", len(c.Consumers))
	return nil
}
