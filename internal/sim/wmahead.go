package sim

import (
	"context"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/watermark"
)

// lostWithOnlyAWatermark: the disk is lost while the cursor object is
// damaged and the bucket holds no segment or tail object above the
// watermark (GC reclaimed everything shipped and deleted its objects). The
// watermark then has no witness: a hydrate must refuse a watermark above
// the cursor object's shipped_through or above every sequence the objects
// hold unless told otherwise (issue 12 finding 11: a forged mark would
// otherwise make a fresh owner append far above the log), and a damaged
// cursor object vouches for nothing. So the run cannot recover without
// an operator (restore --allow-watermark-ahead), exactly as with damage
// at rest (seed 105167). With any data object above the mark, or a
// readable cursor object, nothing is excused.
func (r *run) lostWithOnlyAWatermark(ctx context.Context) bool {
	if !r.cursorDamaged(ctx) {
		return false
	}
	data, _, err := r.w.clean().Get(ctx, blobtier.WatermarkKey(0))
	if err != nil {
		return false
	}
	m, err := watermark.Decode(data)
	if err != nil || m.Seq == 0 {
		return false
	}
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for _, key := range r.w.raw.Keys(blobtier.ListPrefix(0, kind)) {
			k, err := blobtier.ParseKey(key)
			if err != nil {
				continue
			}
			if kind == blobtier.KindSegment && k.Segment > m.Segment || kind == blobtier.KindTail && k.LastSeq > m.Seq {
				return false
			}
		}
	}
	return true
}
