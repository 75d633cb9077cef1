package shipper

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

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

// healAtStart lets reads heal from now on; the segments the start found
// damaged on the local disk (healing) wait for HealPending: the open
// replaces them once nothing can refuse it any more (a refused open
// changes no byte).
func (s *Shipper) healAtStart() {
	if h, ok := s.store.(healer); ok {
		h.SetHealCheck(s.healCheck)
	}
}

// HealPending replaces the segments the start found damaged on the local
// disk by their objects (localseg heal.go), the last step of a successful
// open. One that cannot be replaced is logged and reported (readiness);
// a read tries again.
func (s *Shipper) HealPending() {
	s.mu.Lock()
	ids := slices.Sorted(maps.Keys(s.healing))
	s.healing = nil
	s.mu.Unlock()
	h, ok := s.store.(healer)
	for _, id := range ids {
		if !ok {
			break
		}
		if err := h.HealSegment(id); err != nil {
			s.log.Error("a segment damaged on the local disk could not be replaced by its object; reads of it try again", "segment", id, "key", blobtier.SegmentKey(s.shard, id), "err", err)
		}
	}
}

// unhealed is the store's corrupt sealed segments that no bucket copy
// replaced (readiness reports them).
func (s *Shipper) unhealed() error {
	if h, ok := s.store.(healer); ok {
		return h.Unhealed()
	}
	return nil
}

// localBytes is what the start compares tail objects with for local
// segment seg: its bytes, or its object's for a segment this start found
// damaged on the disk and replaces by that object.
func (s *Shipper) localBytes(seg localseg.SegmentInfo) ([]byte, error) {
	if s.healing[seg.ID] {
		data, _, err := s.b.Get(context.Background(), blobtier.SegmentKey(s.shard, seg.ID))
		if err != nil {
			return nil, fmt.Errorf("read the object of segment %d, damaged on the local disk: %w", seg.ID, err)
		}
		return data, nil
	}
	data, err := s.store.ReadRange(seg.ID, 0, seg.Size)
	if err != nil {
		return nil, fmt.Errorf("read local segment %d: %w", seg.ID, err)
	}
	return data, nil
}

// healCheck is the store's question before it replaces sealed segment id,
// found damaged on the local disk, by its object: yes when the shipper
// holds the object durable, or when the object (which a start whose
// listing missed it did not count) is the segment as it sealed by
// healable's rule. The store then fetches and verifies it.
func (s *Shipper) healCheck(id uint64) bool {
	if s.isDurable(id) {
		return true
	}
	h, ok := s.store.(healer)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := s.b.Stat(ctx, blobtier.SegmentKey(s.shard, id))
	if err != nil {
		return false
	}
	corrupt, err := h.SealedCorrupt(id, st.Meta.Length, st.Meta.XXH64)
	return err == nil && corrupt
}

// healUpload: an upload pass meets a sealed segment that fails
// verification. When healCheck says its object replaces it, the store
// heals it (the segment is evicted, and the next pass finds its object
// durable); otherwise the upload refuses the segment as before.
func (s *Shipper) healUpload(seg localseg.SegmentInfo) (bool, error) {
	h, ok := s.store.(healer)
	if !ok || !s.healCheck(seg.ID) {
		return false, nil
	}
	if err := h.HealSegment(seg.ID); err != nil {
		return false, fmt.Errorf("segment %d is damaged on the local disk and its object %s could not replace it: %w", seg.ID, blobtier.SegmentKey(s.shard, seg.ID), err)
	}
	return true, nil
}
