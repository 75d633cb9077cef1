package shipper

import (
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// recutSource is a tail source whose extent after event after is cut below
// limit bytes. A damaged older epoch's object at a batch's tail key keeps
// the batch from that key; when shipping around it through the segment
// fails too (its upload refused), the batch's events ship cut shorter,
// under other tail keys (docs/FORMAT.md §9.1: a restore passes over the
// damaged object), so a segment that cannot upload does not stall the tail.
type recutSource struct {
	tailbatch.Source
	after uint64
	limit int64
}

func (r recutSource) TailExtent(afterSeq uint64, maxBytes int64) (localseg.Extent, bool, error) {
	if afterSeq == r.after {
		maxBytes = min(maxBytes, r.limit)
	}
	return r.Source.TailExtent(afterSeq, maxBytes)
}

// recutAround is recutSource for batch bt, or false when bt holds one event
// (no shorter cut has another key).
func recutAround(src tailbatch.Source, bt tailbatch.Batch) (recutSource, bool) {
	return recutSource{Source: src, after: bt.FirstSeq - 1, limit: bt.Len() - 1}, bt.Records() > 1
}
