package shipper

import "github.com/bucketlog/bucketlog/reclaim"

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

// Policy is the request's reclaim policy (GC and Local.GC take it).
func (r GCRequest) Policy() reclaim.Policy {
	return reclaim.Policy{Enabled: true, MinRetainedSegments: r.MinRetainedSegments, MaxRetainedSegments: r.MaxRetainedSegments}
}
