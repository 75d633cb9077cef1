package shipper

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// Self-healing (issue 16; the store's half is localseg/heal.go): a sealed
// segment file found damaged at rest is replaced by the bucket's copy. The
// shipper vouches for the copy: it hands one over only for a segment it
// holds durable (its object was read back equal to the local bytes, before
// the damage) and only when the object's epoch is this writer's or an
// older one the lineage keeps (validOlder); the store then checks the copy
// against the segment's index file, the record made when it sealed. At
// start, a local segment whose frames fail their checks, and whose bucket
// copy on the lineage verifies against that record, counts durable and is
// healed once the verdict is in (a refused Open changes no byte). Every
// maintenance pass tries the segments still damaged again.
//
// Readiness: a segment damaged with no verified copy leaves the shard
// ready (/readyz 200: appends and every read that needs none of its damaged
// frames go on); Health and Status report it (state "degraded",
// damaged_segments), and so does the metric bucketlog_local_segments_damaged.

// healStore is what healing needs from the store (*localseg.Store).
type healStore interface {
	SetHealer(h localseg.Healer)
	HealFrom(id uint64, fetch func(ctx context.Context, id uint64) ([]byte, error)) (bool, error)
	CheckHealCopy(id uint64, data []byte) error
	HealDamaged() int
	Damaged() []localseg.DamagedSegment
	RefreshTxWindow() error
	DamagedOnDisk(id uint64) bool
}

var _ healStore = (*localseg.Store)(nil)

// shipperHealer is the store's Healer.
type shipperHealer struct{ s *Shipper }

func (h shipperHealer) HealCopy(ctx context.Context, id uint64) ([]byte, error) {
	if !h.s.isDurable(id) {
		return nil, fmt.Errorf("segment %d is not durable in the bucket (not uploaded and read back intact)", id)
	}
	return h.s.lineageCopy(ctx, id)
}

// registerHealer makes the shipper the store's source of copies.
func (s *Shipper) registerHealer() {
	if hs, ok := s.store.(healStore); ok {
		hs.SetHealer(shipperHealer{s})
	}
}

// lineageCopy reads segment id's object (verified against its metadata)
// and returns it when its epoch is this writer's, or older and kept by
// the lineage.
func (s *Shipper) lineageCopy(ctx context.Context, id uint64) ([]byte, error) {
	key := blobtier.SegmentKey(s.shard, id)
	data, meta, err := s.b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if meta.Epoch == s.o.Epoch {
		return data, nil
	}
	if meta.Epoch < s.o.Epoch && s.fencingOn() {
		parsed, perr := blobtier.ParseKey(key)
		info := blobtier.ObjectInfo{Key: key, Size: int64(len(data)), Meta: meta, Parsed: parsed, ParseErr: perr}
		if s.validOlder(ctx, info, data) {
			return data, nil
		}
	}
	return nil, fmt.Errorf("%w: %s carries epoch %d, which this writer's lineage (epoch %d) does not keep for it", errOffLineage, key, meta.Epoch, s.o.Epoch)
}

// errOffLineage: a segment object whose epoch the lineage does not keep.
var errOffLineage = errors.New("not on the writer's lineage")

// healable judges, at start, a sealed local segment whose bytes differ
// from its bucket object: true when the local file is damaged at rest and
// the object, on the lineage, verifies against the segment's record (it is
// then durable, and healed after the verdict). A failing bucket is an
// error (the start is retried); a damaged or foreign copy is false.
func (s *Shipper) healable(ctx context.Context, seg localseg.SegmentInfo) (bool, error) {
	hs, ok := s.store.(healStore)
	if !ok {
		return false, nil
	}
	data, err := s.lineageCopy(ctx, seg.ID)
	if err != nil {
		if !errors.Is(err, blobtier.ErrCorrupt) && !errors.Is(err, blobtier.ErrNotFound) && !errors.Is(err, errOffLineage) {
			return false, err // the bucket failing: the start is retried
		}
		if hs.DamagedOnDisk(seg.ID) {
			// Not a diverged disk: the local file is damaged at rest and
			// no copy heals it now. Refused, naming both.
			return false, fmt.Errorf("segment %d is damaged on the local disk and its bucket copy cannot heal it: %w", seg.ID, err)
		}
		return false, nil // the verdict judges the segment as before
	}
	if cerr := hs.CheckHealCopy(seg.ID, data); cerr != nil {
		if hs.DamagedOnDisk(seg.ID) {
			return false, fmt.Errorf("segment %d is damaged on the local disk and its bucket copy cannot be verified to heal it: %w", seg.ID, cerr)
		}
		return false, nil
	}
	return true, nil
}

// healAtStart heals the segments healable found, after the verdict.
func (s *Shipper) healAtStart(ids []uint64) error {
	hs, ok := s.store.(healStore)
	if !ok {
		return nil
	}
	for _, id := range ids {
		if _, err := hs.HealFrom(id, s.lineageCopy); err != nil {
			return fmt.Errorf("heal segment %d, damaged on the local disk, from the bucket: %w", id, err)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// The window of transaction ids skipped what came before the damage.
	return hs.RefreshTxWindow()
}

// healDamagedLocked retries the damaged segments (the maintenance pass).
func (s *Shipper) healDamagedLocked() {
	if hs, ok := s.store.(healStore); ok && len(hs.Damaged()) > 0 {
		if n := hs.HealDamaged(); n > 0 {
			s.log.Info("healed damaged local segments from the bucket", "segments", n)
		}
	}
}

// damaged lists the segments damaged with no verified copy.
func damaged(store Store) []uint64 {
	hs, ok := store.(healStore)
	if !ok {
		return nil
	}
	var ids []uint64
	for _, d := range hs.Damaged() {
		ids = append(ids, d.ID)
	}
	return ids
}

// damagedErr is Health's report of damaged segments.
func (s *Shipper) damagedErr() error {
	if ids := damaged(s.store); len(ids) > 0 {
		return fmt.Errorf("local segments %v are damaged on the disk and no verified bucket copy heals them: reads of their damaged frames fail", ids)
	}
	return nil
}
