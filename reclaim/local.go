package reclaim

import (
	"fmt"

	"github.com/bucketlog/bucketlog/localseg"
)

// Store is what reclaim needs from a shard's local store (*localseg.Store).
// Snapshot and Reclaim each take the store's own lock briefly; nothing in
// this package holds it across bucket requests.
type Store interface {
	Snapshot() (localseg.Snapshot, error)
	Reclaim(throughSegment uint64) (localseg.ReclaimResult, error)
}

var _ Store = (*localseg.Store)(nil)

// Local carries out a plan on the local store: it reclaims through
// plan.ThroughSegment in the store's crash-safe order (write-forward of the
// consumers' acks, fsync'd reclaim.json, unlinks, index rebuild). An empty
// plan changes nothing and makes no call. A read-only store refuses
// (localseg.ErrReadOnly).
//
// Local does not consult a bucket: on a store that ships to a bucket, the
// plan must have been made with the durable function, and the caller should
// use Shared so the watermark is committed first.
func Local(store Store, plan Plan) (localseg.ReclaimResult, error) {
	if plan.Empty() {
		return localseg.ReclaimResult{ThroughSeq: plan.ThroughSeq, ThroughSegment: plan.ThroughSegment}, nil
	}
	res, err := store.Reclaim(plan.ThroughSegment)
	if err != nil {
		return res, fmt.Errorf("reclaim through segment %d: %w", plan.ThroughSegment, err)
	}
	return res, nil
}

// Pass is one local GC pass: snapshot, plan, reclaim. durable is nil for a
// store without a bucket.
func Pass(store Store, pol Policy, durable func(id uint64) bool) (Plan, localseg.ReclaimResult, error) {
	snap, err := store.Snapshot()
	if err != nil {
		return Plan{}, localseg.ReclaimResult{}, fmt.Errorf("reclaim: snapshot: %w", err)
	}
	plan := MakePlan(snap, pol, durable)
	res, err := Local(store, plan)
	return plan, res, err
}
