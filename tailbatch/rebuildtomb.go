package tailbatch

import "context"

// WriteCursorDeleted is WriteCursor for an owner that rebuilds the cursor
// object from its store: deleted are the store's recent deletions
// (localseg Snapshot.Deleted, each with the bound of its ConsumerDelete
// frame) and tip the store's tip, so the rebuilt object tombstones the
// consumers deleted whose frame may sit after event S, as a pass's write
// does (tombstone.go). Without them a rebuild over a damaged object, which
// carries no tombstone, lets a restore bring such a consumer back.
func WriteCursorDeleted(ctx context.Context, b CursorStore, shard uint32, shippedThrough uint64, consumers, deleted map[string]uint64, tip uint64) (Cursor, error) {
	return writeCursor(ctx, b, shard, shippedThrough, consumers, deleted, tip)
}

// SyncCursorDeleted is SyncCursor with the store's recent deletions and
// tip (see WriteCursorDeleted).
func (r *Replicator) SyncCursorDeleted(ctx context.Context, b CursorStore, consumers, deleted map[string]uint64, tip uint64) (Cursor, error) {
	r.cursorMu.Lock()
	defer r.cursorMu.Unlock()
	return r.syncCursorLocked(ctx, b, ^uint64(0), consumers, deleted, tip)
}
