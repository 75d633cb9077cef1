package bucketlog

import (
	"context"

	"github.com/bucketlog/bucketlog/shipper"
)

// GCRequest is an operator's explicit reclaim request (shipper.GCRequest).
type GCRequest = shipper.GCRequest

// GCReport explains one reclaim pass: what it removed and what holds the
// boundary where it is.
type GCReport = shipper.GCReport

// GC runs one reclaim pass now (docs/FORMAT.md §8). On a store that ships, it is the
// shared reclaim: only segments durable in the bucket go, the watermark is
// committed first, and bucket objects at or below it are deleted after the
// local reclaim.
func (l *Log) GC(ctx context.Context, req GCRequest) (GCReport, error) {
	if err := l.writable(); err != nil {
		return GCReport{}, err
	}
	if l.ship != nil {
		return l.ship.GC(ctx, req.Policy(), req.Sweep)
	}
	if url, ships := ShipsToBucket(l.dir); ships {
		return l.local.Refused(usagef("shard directory %s ships to %s: GC needs that bucket", l.dir, url))
	}
	return l.local.GC(req.Policy())
}
