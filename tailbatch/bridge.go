package tailbatch

import (
	"context"
	"fmt"
)

// A damaged tail object of ours is deleted to be put again (upload), and
// until that put lands the bucket must not lack a key for its events: a
// hole below objects the bucket retains reads as a reclaim to the start's
// repair of a damaged watermark (docs/FORMAT.md §7.4), and a store adopting
// the repaired mark would reclaim events only the local disk holds. So
// before the delete the replicator puts the same events under other keys,
// read back intact (bridgeBatches): the batch extended over the durable
// events after it when there are any in its segment (one object, another
// last sequence), else cut in two at an Event (two objects). A batch of
// one Event with nothing after it in its segment has no other key: it is
// deleted as before; the hole it can leave is closed as soon as its
// segment is durable, and a batch whose segment is durable needs no
// bridge (Hooks.Covered). A bridge that cannot be put keeps the damaged
// object where it is: the batch fails and the next pass tries again.

// bridgeBatches returns the batches that hold bt's events under other keys,
// or none when there are none (a single Event ending its segment's
// durable frames).
func (r *Replicator) bridgeBatches(src Source, bt Batch) ([]Batch, error) {
	// batch is the extent from event first on, in bt's segment; ok when
	// it reaches last.
	batch := func(first, last uint64) (Batch, bool, error) {
		ext, ok, err := src.TailExtent(first-1, MaxBatchBytes)
		if err != nil || !ok {
			return Batch{}, false, err
		}
		if err := checkExtent(ext, first-1); err != nil || ext.Segment != bt.Segment {
			return Batch{}, false, err
		}
		b := BatchOf(r.shard, ext, bt.Epoch)
		return b, b.LastSeq >= last, nil
	}
	if longer, ok, err := batch(bt.FirstSeq, bt.LastSeq); err != nil {
		return nil, err
	} else if ok && longer.LastSeq > bt.LastSeq {
		return []Batch{longer}, nil
	}
	head, ok := r.shorter(src, bt)
	if !ok {
		return nil, nil
	}
	rest, ok, err := batch(head.LastSeq+1, bt.LastSeq)
	if err != nil || !ok {
		return nil, fmt.Errorf("%w: no extent holds events %d..%d of %s", ErrBadExtent, head.LastSeq+1, bt.LastSeq, bt.Key)
	}
	return []Batch{head, rest}, nil
}

// bridge puts bt's bridge batches (bridgeBatches), each read back intact.
func (r *Replicator) bridge(ctx context.Context, b Putter, src Source, bt Batch) error {
	bs, err := r.bridgeBatches(src, bt)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", bt.Key, err)
	}
	for _, x := range bs {
		if err := upload(ctx, b, src, x, nil, nil); err != nil {
			return fmt.Errorf("bridge %s with %s: %w", bt.Key, x.Key, err)
		}
	}
	return nil
}
