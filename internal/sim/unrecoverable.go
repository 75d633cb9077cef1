package sim

import (
	"context"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// cursorShipped returns the shipped_through of the cursor object at rest,
// or 0 when it is absent or damaged.
func (r *run) cursorShipped(ctx context.Context) uint64 {
	data, _, err := r.w.clean().Get(ctx, blobtier.CursorKey(0))
	if err != nil {
		return 0
	}
	c, err := tailbatch.DecodeCursor(data)
	if err != nil {
		return 0
	}
	return c.ShippedThrough
}

// lostUnrecoverably: a hydrate after a disk loss that adopt already found
// unrecoverable (the bucket's only copy of reported events was damaged at
// rest, and the disk holding the intact one is gone) may serve fewer
// events than were reported, exactly as a restore may while a damaged
// object is outstanding (opRestore): the bucket no longer holds them. The
// owner's repair of the damaged object (delete it, put it again) may even
// have removed it before a damaging put or the loss stopped the put (seed
// 311754: tail 1..12 damaged at rest, deleted by the owner, its put again
// landed damaged and was deleted too, the cursor object damaged at rest,
// then the disk lost), so the hydrate has nothing left to refuse on. What
// stays checked: a hydrate that serves less than an intact cursor object
// at rest vouches for (vouched, its shipped_through) must have refused
// (coldload's shipped_through check), and every event it serves is checked
// as before (checkRestore's other checks run first).
func (r *run) lostUnrecoverably(v *violation, got restored, vouched uint64) bool {
	if !r.unrecoverable || v.check != "restore-missing" || got.tip < vouched {
		return false
	}
	for _, c := range got.consumers {
		if c > got.tip {
			return false // a cursor past the data stays a violation
		}
	}
	r.logf("  (unrecoverable: the hydrate serves through %d, short of the reported %d; the cursor object at rest vouches for %d)", got.tip, r.m.floor(), vouched)
	return true
}
