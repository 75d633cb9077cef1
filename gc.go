package bucketlog

import (
	"context"

	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/shipper"
)

// GCRequest is an operator's explicit reclaim request: it runs with
// consumer interest, plus keep-last-N when MaxRetainedSegments is set,
// whatever the configured default.
type GCRequest struct {
	MinRetainedSegments int
	MaxRetainedSegments int
	// Sweep lists the shard's bucket objects and deletes every one the
	// watermark covers, leftovers of earlier passes included (the gc
	// command does). Without it, a pass after a complete sweep deletes only
	// what it newly covers, by key, and costs what it removes rather than
	// the history the bucket keeps.
	Sweep bool
}

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
	pol := reclaim.Policy{Enabled: true, MinRetainedSegments: req.MinRetainedSegments, MaxRetainedSegments: req.MaxRetainedSegments}
	if l.ship != nil {
		return l.ship.GC(ctx, pol, req.Sweep)
	}
	if url, ships := ShipsToBucket(l.dir); ships {
		return l.local.Refused(usagef("shard directory %s ships to %s: GC needs that bucket", l.dir, url))
	}
	return l.local.GC(pol)
}
