package shipper

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// Consumers the bucket's cursor object shows deleted (docs/FORMAT.md §6.6,
// §9.1 step 7; issue 12 finding 6).
//
// The cursor object was written after every consumer frame positioned
// before the frame of its shipped_through event S (on the disk that wrote
// it), and its tombstones name consumers deleted whose ConsumerDelete may
// sit after it. A disk that opens against it may be older than that write
// (an older copy of the volume, which the start-up checks accept when the
// bucket holds no event it lacks) and still hold a consumer deleted since:
// serving it would bring the deleted consumer back and hold GC for it. So
// at start the owner reads its own consumer frames from event S on, with
// the restore's rule: a live consumer the object does not list stays only
// if those frames created it after the object's write (a ConsumerCreate
// among them, or for a tombstoned one frames after a ConsumerDelete of it);
// otherwise it is deleted locally. A consumer created on this disk after the
// object's last write is positioned after event S, so it is kept.

// consumerDeleter is the optional part of a Store that deletes consumers
// (*localseg.Store has it).
type consumerDeleter interface {
	DeleteConsumer(name string) error
}

// consumerRun is what the local consumer frames positioned at or after
// event S do to one consumer.
type consumerRun struct {
	reset   bool   // a ConsumerDelete among them
	created bool   // a ConsumerCreate after the last ConsumerDelete
	at      uint64 // the position of the last ConsumerDelete
}

// dropCursorDeleted deletes the local consumers the cursor object cur shows
// deleted (see above). It does nothing without a cursor object, or when the
// local store reclaimed past S (its write-forward frames then stand for
// consumer frames that are gone).
func (s *Shipper) dropCursorDeleted(cur tailbatch.Cursor, snap localseg.Snapshot) error {
	del, ok := s.store.(consumerDeleter)
	if !ok || cur.V == 0 || snap.ReclaimedSeq > cur.ShippedThrough {
		return nil
	}
	var unlisted []string
	for _, name := range slices.Sorted(maps.Keys(snap.Consumers)) {
		if _, ok := cur.Consumers[name]; !ok {
			unlisted = append(unlisted, name)
		}
	}
	if len(unlisted) == 0 {
		return nil
	}
	runs, err := s.consumerRunsFrom(cur.ShippedThrough, snap.Segments)
	if err != nil {
		return err
	}
	for _, name := range unlisted {
		r := runs[name]
		_, tomb := cur.Deleted[name]
		if tomb && r.reset || !tomb && r.created {
			continue
		}
		if err := del.DeleteConsumer(name); err != nil && !errors.Is(err, localseg.ErrUnknownConsumer) {
			return fmt.Errorf("delete consumer %s, which the cursor object shows deleted: %w", name, err)
		}
		s.log.Warn("a consumer the bucket's cursor object shows deleted was alive on this disk (an older copy?); deleted it",
			"consumer", name, "shipped_through", cur.ShippedThrough)
	}
	return nil
}

// consumerRunsFrom reads the local consumer frames positioned at or after
// event from (the last event before a frame is its position), from the
// segment holding that event on.
func (s *Shipper) consumerRunsFrom(from uint64, segs []localseg.SegmentInfo) (map[string]consumerRun, error) {
	start := 0
	for i, seg := range segs {
		if seg.Events > 0 && seg.FirstSeq <= from {
			start = i
		}
	}
	runs := map[string]consumerRun{}
	last := uint64(0) // the last event before the frame at hand
	if start < len(segs) && segs[start].FirstSeq > 0 {
		last = segs[start].FirstSeq - 1
	}
	for _, seg := range segs[start:] {
		data, err := s.localBytes(seg)
		if err != nil {
			return nil, err
		}
		for f, err := range frame.Frames(data) {
			if err != nil {
				return nil, fmt.Errorf("local segment %d: %w", seg.ID, err)
			}
			if f.Kind == frame.KindEvent {
				last = f.Seq
				continue
			}
			if last < from {
				continue
			}
			r := runs[f.Consumer]
			switch f.Kind {
			case frame.KindConsumerCreate:
				r.created = true
			case frame.KindConsumerDelete:
				r = consumerRun{reset: true, at: last}
			}
			runs[f.Consumer] = r
		}
	}
	return runs, nil
}
