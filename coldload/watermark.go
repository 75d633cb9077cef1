package coldload

import (
	"context"

	"github.com/bucketlog/bucketlog/frame"
)

// checkWatermark cross-checks the reclaim watermark against the bucket's
// own objects (issue 12 finding 11). A watermark says that every sequence
// through it was once in the bucket and has been reclaimed, so something
// must vouch for it: the cursor object's shipped_through at or above it
// (the owner wrote that after shipping those sequences; it is all that is
// left after a GC that reclaimed everything), a tail object's key reaching
// it, a segment object above the watermark segment (its content is then
// checked to continue at watermark + 1 like any other segment), or the
// watermark segment itself, not yet deleted, ending exactly at the
// watermark. A watermark nothing vouches for — above the cursor object's
// shipped_through (or with no readable cursor object) and above every
// sequence the objects hold — is forged or misplaced: taken at its word it
// restores as an empty log and a new owner appends far above the real
// history. It is a *WatermarkAheadError (nil when vouched for).
//
// The check asks for any one witness, not all: the cursor object lags the
// watermark by up to one tick in normal operation (segments uploaded and
// reclaimed before the next cursor write), and segment objects below it are
// deleted by the reclaim itself.
func (p *plan) checkWatermark(ctx context.Context, r Reader) *WatermarkAheadError {
	m := p.mark
	if !p.hasMark || m.Seq == 0 {
		return nil
	}
	if p.hasCursor && p.cursor.ShippedThrough >= m.Seq {
		return nil
	}
	if p.maxTailLast >= m.Seq || len(p.segs) > 0 {
		return nil
	}
	e := &WatermarkAheadError{Shard: p.shard, WatermarkSeq: m.Seq, WatermarkSegment: m.Segment,
		HasCursor: p.hasCursor, ShippedThrough: p.cursor.ShippedThrough,
		HighestTailSeq: p.maxTailLast, HighestSegment: p.maxSegID}
	if p.markSeg != nil {
		// Read only now, when nothing else vouches for the watermark. An
		// object that cannot be read or verified vouches for nothing.
		data, _, err := r.Get(ctx, p.markSeg.key)
		if err == nil {
			if sum, err := frame.VerifySegment(p.markSeg.id, data, 0); err == nil && sum.Events > 0 {
				if sum.LastSeq == m.Seq {
					return nil
				}
				e.SegmentEnds = sum.LastSeq
			}
		}
	}
	return e
}
