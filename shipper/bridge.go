package shipper

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// bridge puts tail objects holding every event of sealed segment seg,
// read back intact, before putSegment deletes the segment's damaged object
// to put it again (docs/FORMAT.md §7.1 step 5). Until the put lands, the bucket
// would otherwise lack any key for those events, and a hole at the bottom
// of what the bucket retains reads as a reclaim: the start's repair of a
// damaged watermark takes every sequence below the lowest one retained for
// reclaimed (repairTarget), and a store adopting that mark reclaims events
// only the local disks hold. With the tail objects in place the delete
// removes no key the repair counts on: the premise of watermark.Repair (the
// owner deletes only what it reclaimed) holds.
//
// The objects are the batches the tail replicator cuts after the event
// before the segment (the same keys and bytes, so a later tail pass finds
// them its own), shipped whether or not tail replication is on; cleanup
// deletes them like any tail object once the segment is durable again. An
// error means the bridge is not in place (putSegment then deletes all the
// same: see there).
func (s *Shipper) bridge(ctx context.Context, seg localseg.SegmentInfo) error {
	if seg.Events == 0 {
		return nil // no event whose only key the delete could remove
	}
	for after := seg.FirstSeq - 1; after < seg.LastSeq; {
		ext, ok, err := s.store.TailExtent(after, tailbatch.MaxBatchBytes)
		if err != nil || !ok || ext.Segment != seg.ID || ext.FirstSeq != after+1 || ext.LastSeq > seg.LastSeq {
			return fmt.Errorf("bridge segment %d with tail objects: events after %d: extent %+v %v: %w", seg.ID, after, ext, ok, err)
		}
		bt := tailbatch.BatchOf(s.shard, ext, s.o.Epoch)
		// Never a delete here: a tail object already under the key may be
		// the one object left holding these events (sim seed 6016684: the
		// bridge's put read back damaged, Upload deleted the replicator's
		// object 35..40, its put again failed, and a later start took the
		// damaged segment object for durable).
		if err := tailbatch.UploadKeeping(ctx, s.b, s.store, bt); err != nil && !s.holdsBatch(ctx, bt, err) {
			return fmt.Errorf("bridge segment %d with tail objects: %w", seg.ID, err)
		}
		s.mu.Lock()
		s.pendingTails[bt.Key] = &pendingTail{last: bt.LastSeq} // cleanup deletes it once covered
		s.mu.Unlock()
		after = ext.LastSeq
	}
	return nil
}

// holdsBatch reports whether the object that made bt's upload fail with a
// conflict (another epoch's metadata under its key) holds exactly bt's
// bytes and belongs to the lineage: a tail object of an earlier epoch
// shipped the same cut, and it bridges as well as ours.
func (s *Shipper) holdsBatch(ctx context.Context, bt tailbatch.Batch, err error) bool {
	if !errors.Is(err, blobtier.ErrConflict) {
		return false
	}
	want, rerr := s.store.ReadRange(bt.Segment, bt.Start, bt.Len())
	if rerr != nil {
		return false
	}
	info, serr := s.b.Stat(ctx, bt.Key)
	if serr != nil || info.Meta.Epoch > s.o.Epoch || (info.Meta.Epoch < s.o.Epoch && !s.validOlder(ctx, info, want)) {
		return false
	}
	got, _, gerr := s.b.Get(ctx, bt.Key)
	return gerr == nil && bytes.Equal(got, want)
}
