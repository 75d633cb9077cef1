package tailbatch

// One pass (Replicate) and the cursor object it keeps up to date.

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// snapshotter is the optional part of a Source that lets Replicate write the
// cursor object with the store's live consumers (*localseg.Store has it).
type snapshotter interface {
	Snapshot() (localseg.Snapshot, error)
}

// SyncCursor writes the cursor object (see WriteCursor) with the current
// shipped position and consumers, and counts the write. Call it after a tail
// put of the same tick succeeded; it is what Replicate does when the object
// is due.
//
// Calls are serialised per replicator, and no write carries a lower
// shipped_through than the one before it. A caller whose consumers come
// from a snapshot should take that snapshot after the previous write ended
// (Replicate does), or an older snapshot may follow a newer one.
func (r *Replicator) SyncCursor(ctx context.Context, b CursorStore, consumers map[string]uint64) (Cursor, error) {
	r.cursorMu.Lock()
	defer r.cursorMu.Unlock()
	return r.syncCursorLocked(ctx, b, ^uint64(0), consumers, nil, noTip)
}

// syncCursorLocked is SyncCursor; the caller holds cursorMu.
// deleted are the store's recent deletions and tip bounds the position of
// its ConsumerDelete frames (noTip: unknown); see tombstone.go.
func (r *Replicator) syncCursorLocked(ctx context.Context, b CursorStore, through uint64, consumers, deleted map[string]uint64, tip uint64) (Cursor, error) {
	r.mu.Lock()
	shipped := max(min(r.shipped, through), r.cursorShipped)
	// Every consumer known alive since the last write, so one created and
	// deleted between two writes (a failed one between) still leaves a
	// tombstone.
	seen := maps.Clone(r.cursorSeen)
	if seen == nil {
		seen = map[string]uint64{}
	}
	for name := range r.cursorConsumers {
		seen[name] = noTip
	}
	for name, at := range deleted {
		seen[name] = max(seen[name], at)
	}
	r.mu.Unlock()
	c, err := writeCursor(ctx, b, r.shard, shipped, consumers, seen, tip)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		for name := range consumers {
			seen[name] = noTip
		}
		r.cursorSeen = seen
		r.stats.CursorFailed++
		r.stats.LastError = err.Error()
		return Cursor{}, err
	}
	r.stats.CursorWrites++
	if shipped > r.cursorShipped {
		r.cursorShipped = shipped
	}
	r.cursorConsumers = maps.Clone(consumers)
	r.cursorSeen = nil
	if tip != noTip {
		r.cursorDeleted = maps.Clone(deleted)
	}
	return c, nil
}

// KnowCursor tells a new Replicator what the bucket's cursor object holds
// (its consumers and its shipped_through, as read at start), so a pass
// rewrites it as soon as the store's consumers differ (a consumer deleted
// after a restart, with no event since, must still leave the object, or a
// restore brings it back) or the shipped position is past the object's.
// CursorShipped then says what the object says, not what the start
// position implies: GC's witness rule reads it (a watermark past the
// object's shipped_through, with the objects below it deleted, has no
// witness left).
func (r *Replicator) KnowCursor(consumers map[string]uint64, shippedThrough uint64) {
	r.cursorMu.Lock()
	defer r.cursorMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cursorShipped = min(r.cursorShipped, shippedThrough)
	r.cursorConsumers = maps.Clone(consumers)
	if r.cursorConsumers == nil {
		r.cursorConsumers = map[string]uint64{}
	}
}

// SyncCursorIfDue writes the cursor object now when it is due (the
// shipped position moved past the last one written, or src's consumers
// changed), as a pass does after its batches: for a caller that needs the
// object to cover the shipped position before it acts (GC, whose
// watermark the object witnesses).
func (r *Replicator) SyncCursorIfDue(ctx context.Context, src Source, b CursorStore) (Cursor, bool, error) {
	return r.syncCursorIfDue(ctx, src, b, false)
}

// CursorShipped is the shipped_through of the last cursor object this
// replicator wrote or knew at its start: what a restore can learn from
// the object now.
func (r *Replicator) CursorShipped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cursorShipped
}

// Replicate is Prepare, Upload and Commit (or Fail) of every batch in one
// call, followed by the cursor object when it is due. It takes no lock
// across the bucket calls, so it is also safe to run on a timer next to
// appends; a driver that wants the steps apart calls them itself. A pass
// stops at the first failed upload: nothing after it could be committed.
// When nothing new is durable and the cursor object is up to date, it
// issues no request at all.
//
// The cursor object is due when the shipped position moved past the last
// one written, or when the consumers differ from those it carried; a pass
// that stopped at a failure still writes it for what committed before
// (see Hooks.CursorOnlyAfterSuccess). It carries src's live consumers when src has a
// Snapshot() (localseg.Snapshot, error) method (*localseg.Store has), and
// none otherwise. A Disabled replicator ships no tail object but still
// writes the cursor object when it is due (Advance moved the position, or
// the consumers changed).
func (r *Replicator) Replicate(ctx context.Context, src Source, b Bucket) (Result, error) {
	return r.ReplicateWith(ctx, src, b, Hooks{})
}

// Hooks let a driver that keeps books of its own (the engine's shipper)
// run its passes through Replicate. Every field is optional; the zero value
// is Replicate.
type Hooks struct {
	// Resync returns a sequence the bucket is known to hold contiguously
	// (the engine: the highest sequence of its contiguous durable
	// segments). When Prepare refuses an extent (ErrBadExtent: the shipped
	// position may sit below the local reclaim base, and everything below
	// that base is in the bucket) and Resync returns more than
	// ShippedThrough, the pass calls Advance with it and prepares once
	// more, rather than fail every pass.
	Resync func() uint64
	// AfterUpload, when set, runs after each batch's put was accepted and
	// before its Commit (writer fencing: the check that no newer epoch was
	// claimed, made after the put completed), concurrently with the put's
	// read-back; after an upload that found its object already there (a
	// conflict Conflict cleared) it runs after the upload. An error fails
	// the batch like a failed upload: nothing is committed and the pass
	// stops. It may also run for a batch whose read-back then fails (and
	// more than once for one batch): only Committed says the batch counts.
	AfterUpload func(Batch) error
	// Conflict, when set, classifies an upload that found another object
	// under the batch's key (errors.Is(err, blobtier.ErrConflict)) before
	// Fail records it: the error it returns replaces err, so a driver that
	// knows the occupant is no second writer (writer fencing: a stale
	// writer's object of an older epoch) keeps the replicator running.
	Conflict func(Batch, error) error
	// Committed is called after each batch's Commit, before the next
	// upload.
	Committed func(Batch)
	// Failed is called after a failed upload, once Fail recorded it (a
	// conflict, errors.Is(err, blobtier.ErrConflict), is a second writer).
	// The pass stops there.
	Failed func(Batch, error)
	// CursorOnlyAfterSuccess writes the cursor object only after a pass in
	// which every batch committed; by default a pass that stopped at a
	// failure still writes it for what committed before.
	CursorOnlyAfterSuccess bool
	// HoldCursor, when it returns true, keeps the pass from writing the
	// cursor object at all (the engine holds a damaged one back until the
	// objects its rebuild would vouch for are in the bucket again).
	HoldCursor func() bool
	// HoldPosition, when it returns true, keeps the pass from writing the
	// cursor object for a move of the shipped position alone: it is
	// written only when the consumers changed (an Ack or a delete after
	// the last event rides in no tail object; its only bucket copy is the
	// cursor object).
	HoldPosition func() bool
}

// ReplicateWith is Replicate with hooks.
func (r *Replicator) ReplicateWith(ctx context.Context, src Source, b Bucket, h Hooks) (Result, error) {
	batches, err := r.Prepare(src)
	if errors.Is(err, ErrBadExtent) && h.Resync != nil {
		if seq := h.Resync(); seq > r.ShippedThrough() {
			r.Advance(seq)
			batches, err = r.Prepare(src)
		}
	}
	res := Result{Prepared: len(batches)}
	if err != nil {
		res.ShippedThrough = r.ShippedThrough()
		return res, err
	}
	var failure error
	reshapes, reprepare := 0, false
	for len(batches) > 0 {
		bt := batches[0]
		batches = batches[1:]
		var afterPut func() error
		checked := false // AfterUpload passed after the put that read back
		if h.AfterUpload != nil {
			afterPut = func() error {
				err := h.AfterUpload(bt)
				checked = err == nil
				return err
			}
		}
		err := upload(ctx, b, src, bt, afterPut, nil)
		if err != nil && h.Conflict != nil && errors.Is(err, blobtier.ErrConflict) {
			err = h.Conflict(bt, err)
		}
		if err != nil && errors.Is(err, ErrOccupied) && reshapes < maxReshapes {
			if short, ok := r.shorter(src, bt); ok {
				// The same events under another key (ErrOccupied); the
				// rest are prepared again once it commits.
				reshapes++
				batches, reprepare = []Batch{short}, true
				continue
			}
		}
		if err == nil && h.AfterUpload != nil && !checked {
			err = h.AfterUpload(bt)
		}
		if err != nil {
			r.Fail(bt, err)
			res.Failed++
			if h.Failed != nil {
				h.Failed(bt, err)
			}
			failure = err
			break
		}
		if err := r.Commit(bt); err != nil {
			// Another driver moved the cursor backward? It cannot; a gap
			// here means a concurrent pass failed first. Stop, like a
			// failure, without counting an upload failure.
			failure = err
			break
		}
		if h.Committed != nil {
			h.Committed(bt)
		}
		res.Batches++
		res.Records += bt.Records()
		res.Bytes += bt.Len()
		if reprepare && len(batches) == 0 {
			reprepare = false
			if batches, err = r.Prepare(src); err != nil {
				failure = err
				break
			}
		}
	}
	res.ShippedThrough = r.ShippedThrough()
	if failure != nil && h.CursorOnlyAfterSuccess || h.HoldCursor != nil && h.HoldCursor() {
		return res, failure
	}
	var cerr error
	res.Cursor, res.CursorWritten, cerr = r.syncCursorIfDue(ctx, src, b, h.HoldPosition != nil && h.HoldPosition())
	res.CursorFailed = cerr != nil
	return res, errors.Join(failure, cerr)
}

// syncCursorIfDue writes the cursor object when the shipped position moved
// past the last one written (unless holdPosition) or src's consumers
// changed since. The shipped
// position is read before the consumers snapshot and caps the object's
// shipped_through: a restore trusts the object's consumers for every frame
// up to its shipped_through, so the snapshot must be no older than the
// frame of shipped_through; a position read after the snapshot could name
// frames (a consumer created meanwhile) the snapshot has not seen. Both are
// read under cursorMu, so a later write never carries an older snapshot.
func (r *Replicator) syncCursorIfDue(ctx context.Context, src Source, b CursorStore, holdPosition bool) (Cursor, bool, error) {
	r.cursorMu.Lock()
	defer r.cursorMu.Unlock()
	through := r.ShippedThrough()
	consumers, deleted, tip, err := liveConsumers(src)
	if err != nil {
		return Cursor{}, false, fmt.Errorf("tailbatch: shard %d: consumers for the cursor object: %w", r.shard, err)
	}
	r.mu.Lock()
	moved := r.shipped > r.cursorShipped && !holdPosition
	due := moved || !maps.Equal(r.cursorConsumers, consumers) || !maps.Equal(r.cursorDeleted, deleted)
	r.mu.Unlock()
	if !due {
		return Cursor{}, false, nil
	}
	c, err := r.syncCursorLocked(ctx, b, through, consumers, deleted, tip)
	if err != nil {
		return Cursor{}, false, fmt.Errorf("tailbatch: shard %d: write the cursor object: %w", r.shard, err)
	}
	return c, true, nil
}

// liveConsumers returns src's live consumers, its recent deletions and its
// tip (which bounds the position of every ConsumerDelete frame it wrote so
// far; noTip without a snapshot).
func liveConsumers(src Source) (map[string]uint64, map[string]uint64, uint64, error) {
	s, ok := src.(snapshotter)
	if !ok {
		return nil, nil, noTip, nil
	}
	snap, err := s.Snapshot()
	if err != nil {
		return nil, nil, 0, err
	}
	return snap.Consumers, snap.Deleted, snap.Tip, nil
}
