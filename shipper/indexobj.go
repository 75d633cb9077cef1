package shipper

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
)

// Index objects (docs/FORMAT.md §6.10): once a segment object is durable,
// the uploader puts the segment's index (its index file, localseg
// segindex.go) under `idx.<shard>.<id>`, write-once, with the writer's
// epoch, so a store that never held the segment locates its events without
// fetching it. They are derived: a failed put is counted and logged and
// retried by later passes while the segment is still on the local disk,
// never a shipping failure, and never holds the shipped position, GC or
// eviction back. Another object under the key (an older put of other bytes
// — a stale writer's index of its own segment under the id) is left in
// place, not deleted (§6.9: no conditional delete): readers use an index
// object only when it records the exact length and xxh64 of the segment
// they accepted, so that one is never used. No read-back: a damaged index
// object fails verification at every read and is ignored the same way.

// indexer is what index objects need from the store (*localseg.Store).
type indexer interface {
	SegmentIndexObject(id uint64, data []byte) ([]byte, error)
}

// maxIndexRetries bounds the index objects one upload pass puts again.
const maxIndexRetries = 8

// putIndex puts the index object of segment id, whose bytes data (verified)
// are durable in the bucket now. A failure is noted for a later pass.
func (s *Shipper) putIndex(ctx context.Context, id uint64, data []byte) {
	ix, ok := s.store.(indexer)
	if !ok {
		return
	}
	body, err := ix.SegmentIndexObject(id, data)
	if err == nil {
		err = s.putIndexObject(ctx, blobtier.IndexKey(s.shard, id), body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.m.IndexUploadFailed.Inc()
		if s.indexRetry == nil {
			s.indexRetry = map[uint64]bool{}
		}
		s.indexRetry[id] = true
		s.log.Warn("the index object of a durable segment could not be put; reads elsewhere fetch the segment instead (retried)", "segment", id, "err", err)
		return
	}
	delete(s.indexRetry, id)
	s.m.IndexUploaded.Inc()
}

// putIndexObject puts body under key. The same bytes already there (a
// retry whose answer was lost, or an older epoch's put of this history's
// index) is success; our own put that landed with another length is
// deleted and put once more; any other object is an error (left in place).
func (s *Shipper) putIndexObject(ctx context.Context, key string, body []byte) error {
	err := s.b.PutIfAbsent(ctx, key, body, s.o.Epoch)
	if errors.Is(err, blobtier.ErrCorrupt) {
		if err = s.b.Delete(ctx, key); err == nil {
			err = s.b.PutIfAbsent(ctx, key, body, s.o.Epoch)
		}
	}
	if errors.Is(err, blobtier.ErrConflict) {
		have, _, gerr := s.b.Get(ctx, key)
		switch {
		case gerr != nil:
			return errors.Join(err, gerr)
		case bytes.Equal(have, body):
			return nil
		}
		return fmt.Errorf("%w: the index object under %s describes other bytes (left in place; readers ignore it)", err, key)
	}
	return err
}

// retryIndexes puts again, at most maxIndexRetries a pass, the index
// objects whose put failed, of segments still on the local disk and
// durable.
func (s *Shipper) retryIndexes(ctx context.Context) {
	s.mu.Lock()
	var ids []uint64
	for id := range s.indexRetry {
		if len(ids) == maxIndexRetries {
			break
		}
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		if s.stopped() != nil {
			return
		}
		evicted := false
		if ev, ok := s.store.(evicter); ok {
			_, _, evicted = ev.EvictedSegment(id)
		}
		var data []byte
		err := fmt.Errorf("segment %d left the disk", id)
		if !evicted {
			data, err = s.store.ReadSegment(id)
		}
		if err != nil || !s.isDurable(id) {
			// Reclaimed or evicted since: nothing to index from here.
			s.mu.Lock()
			delete(s.indexRetry, id)
			s.mu.Unlock()
			continue
		}
		s.putIndex(ctx, id, data)
	}
}
