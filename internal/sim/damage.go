package sim

import (
	"context"
	"errors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/watermark"
)

// watermarkUnreadable reports whether the watermark object now at rest
// fails verification or does not decode, whatever damaged it: a fault at
// rest (which watermarkDamaged tracks) or a damaging write fault on its
// put (a compare-and-swap that reported success and landed damaged bytes).
// The two leave the same bucket. A damaged watermark stops every restore
// and hydrate until its owner rewrites it (watermark.Repair, at Open and
// in GC): the contract asks the owner to repair it, not a restore to guess
// the reclaim base from the objects that are left (a missing segment just
// above the mark would then look reclaimed). So a restore refused on it
// mid-run, or a disk lost while it is damaged, is excused exactly as for
// damage at rest; the final strict restore, after the owner's GC had its
// chance to repair, is not.
func (r *run) watermarkUnreadable(ctx context.Context) bool {
	data, _, err := r.w.clean().Get(ctx, blobtier.WatermarkKey(0))
	if err != nil {
		return errors.Is(err, blobtier.ErrCorrupt)
	}
	_, err = watermark.Decode(data)
	return err != nil
}
