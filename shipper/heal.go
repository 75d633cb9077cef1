package shipper

import (
	"context"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// Self-healing (issue 16): a local sealed segment found corrupt is
// replaced by its bucket copy (localseg heal.go). While the shipper runs,
// a read that finds one asks isDurable about its object; at start, a
// segment whose local bytes differ from its object is healed, not a
// divergence, when the local bytes no longer hash to the digest recorded
// when it sealed and the object carries exactly that digest and length
// (the start's checks have already kept only objects of this writer's
// lineage). The start decides on that; the replacement (which fetches the
// object and verifies every frame) runs once the verdict is in.

// healer is what healing needs from the store (*localseg.Store).
type healer interface {
	SetHealCheck(durable func(id uint64) bool)
	SealedCorrupt(id uint64, size int64, digest uint64) (bool, error)
	HealSegment(id uint64) error
	Unhealed() error
}

// healable reports whether seg, which the bucket's object info does not
// match, is corrupt on the local disk while the object is the segment as
// it sealed (by its metadata).
func (s *Shipper) healable(ctx context.Context, reads *openReads, info blobtier.ObjectInfo, seg localseg.SegmentInfo) (bool, error) {
	h, ok := s.store.(healer)
	if !ok || !seg.Sealed {
		return false, nil
	}
	st, err := reads.stat(ctx, info.Key)
	if err != nil {
		return false, nil // matches judged the object already
	}
	return h.SealedCorrupt(seg.ID, st.Meta.Length, st.Meta.XXH64)
}

// healAtStart lets reads heal from now on and replaces the segments the
// start found corrupt on the local disk.
func (s *Shipper) healAtStart(ids []uint64) error {
	h, ok := s.store.(healer)
	if !ok {
		return nil
	}
	h.SetHealCheck(s.isDurable)
	for _, id := range ids {
		if err := h.HealSegment(id); err != nil {
			return fmt.Errorf("segment %d is corrupt on the local disk and could not be replaced by its bucket copy %s: %w", id, blobtier.SegmentKey(s.shard, id), err)
		}
	}
	return nil
}

// unhealed is the store's corrupt sealed segments that no bucket copy
// replaced (readiness reports them).
func (s *Shipper) unhealed() error {
	if h, ok := s.store.(healer); ok {
		return h.Unhealed()
	}
	return nil
}
