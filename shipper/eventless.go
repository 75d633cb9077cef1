package shipper

import (
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// verifiedAtStart is verifiedBefore for any sealed segment seg of segs.
// A segment without events (only consumer frames: a seal after acks or
// consumer changes alone) has no sequence the shipped position could move
// over, and no tail object covers a consumer frame, so verifiedBefore's
// witnesses hold of it vacuously: its put may have landed damaged bytes
// under our metadata with a failed read-back, and it would count durable
// on the metadata alone. Its witness is the first segment with events
// above it: the uploader puts segments in id order and stops at the first
// failure, and tail cleanup's contiguous durable watermark stops at the
// first segment not durable, so a later segment read back intact means
// this one was too. With none (it is among the last sealed segments), it
// is read back: at most the few after the last segment with events, so
// Open stays O(1) in the log's length.
func verifiedAtStart(seg localseg.SegmentInfo, segs []localseg.SegmentInfo, shipped uint64, tails []blobtier.Key) bool {
	if seg.Events > 0 {
		return verifiedBefore(seg, shipped, tails)
	}
	for _, later := range segs {
		if later.ID > seg.ID && later.Sealed && later.Events > 0 {
			return verifiedBefore(later, shipped, tails)
		}
	}
	return false
}
