package shipper

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// Eviction (issue 16, first slice): with Options.LocalRetentionBytes > 0,
// every maintenance pass, after the uploads, moves the oldest sealed
// segments off the disk while the sealed segments on disk hold more than
// the budget, each only when this shipper holds it durable (its object read
// back intact and equal to the local bytes: isDurable, the notion GC and
// the contiguous durable watermark use) and stopping at the first one that
// is not (localseg Store.Evict). Reads of evicted segments go to the bucket
// (RemoteSegments). The budget is a target: while the bucket fails, sealed
// segments stay and the overshoot is a metric.

// evicter is what eviction needs from the store (*localseg.Store).
type evicter interface {
	Evict(budget int64, durable func(id uint64) bool) (localseg.EvictResult, error)
	EvictedSegment(id uint64) (size int64, digest uint64, ok bool)
	RemoteStats() localseg.RemoteStats
}

// evictLocked runs one eviction pass; the caller holds the maintenance
// lock. A failure is logged and retried by the next pass.
func (s *Shipper) evictLocked() {
	ev, ok := s.store.(evicter)
	if !ok || s.o.LocalRetentionBytes <= 0 {
		return
	}
	res, err := ev.Evict(s.o.LocalRetentionBytes, s.isDurable)
	s.noteErr(err)
	if err != nil {
		s.log.Error("evicting segments durable in the bucket failed", "err", err)
	}
	if res.Overshoot > 0 && len(res.Evicted) == 0 {
		s.log.Debug("local sealed segments above the retention budget are not yet durable in the bucket", "overshoot_bytes", res.Overshoot)
	}
}

// evictedMatch judges, at start, the bucket's object of a segment the local
// store evicted: it must carry the length and xxh64 the segment had when it
// left the disk (then it was read back intact before the eviction, and
// every remote read verifies it again). ok is false for a segment on disk.
func (s *Shipper) evictedMatch(seg localseg.SegmentInfo, meta blobtier.Meta) (match, ok bool) {
	ev, isEv := s.store.(evicter)
	if !isEv {
		return false, false
	}
	size, digest, ok := ev.EvictedSegment(seg.ID)
	if !ok {
		return false, false
	}
	return meta.Length == size && meta.XXH64 == digest, true
}

// checkEvicted refuses a start whose evicted segments above the reclaim
// base the bucket does not list with the evicted bytes' metadata: their
// events exist nowhere else. It is not a verdict on the disk (a listing may
// have missed the object): the start is retried like a failing bucket, and
// fails naming the segment when it stays missing.
func (s *Shipper) checkEvicted(snap localseg.Snapshot, baseSeg uint64) error {
	ev, ok := s.store.(evicter)
	if !ok {
		return nil
	}
	for _, seg := range snap.Segments {
		if _, _, evicted := ev.EvictedSegment(seg.ID); evicted && seg.ID > baseSeg && !s.durable[seg.ID] {
			return fmt.Errorf("segment %d (sequences %d–%d) was evicted from the local disk and the bucket does not hold it as it was (%s): its events exist nowhere else; restore the object, or fence this disk and restore the shard from what the bucket holds",
				seg.ID, seg.FirstSeq, seg.LastSeq, blobtier.SegmentKey(s.shard, seg.ID))
		}
	}
	return nil
}

// RemoteSegments is the store's source of evicted segments: the segment
// object of shard, read and checked against its metadata (blobtier.Get);
// the store then checks its length, xxh64 and every frame against what it
// evicted.
func RemoteSegments(b blobtier.Bucket, shard uint32) localseg.RemoteSource {
	if b == nil {
		return nil
	}
	return remoteSegments{b: b, shard: shard}
}

type remoteSegments struct {
	b     blobtier.Bucket
	shard uint32
}

// FetchIndex reads segment id's index object (indexobj.go), checked against
// its metadata; the store checks what it describes (localseg indexobj.go).
func (r remoteSegments) FetchIndex(ctx context.Context, id uint64) ([]byte, error) {
	data, _, err := r.b.Get(ctx, blobtier.IndexKey(r.shard, id))
	return data, err
}

func (r remoteSegments) FetchSegment(ctx context.Context, id uint64) ([]byte, uint64, error) {
	return r.FetchSegmentWatched(ctx, id, nil)
}

// FetchSegmentWatched is FetchSegment showing v the bytes as they arrive
// (blobtier.GetWatched), so the store checks the frames during the GET
// (localseg.WatchedSource).
func (r remoteSegments) FetchSegmentWatched(ctx context.Context, id uint64, v *frame.Verifier) ([]byte, uint64, error) {
	var w blobtier.Watcher
	if v != nil {
		w = v // never a nil *Verifier in a non-nil interface
	}
	data, m, err := blobtier.GetWatched(ctx, r.b, blobtier.SegmentKey(r.shard, id), nil, w)
	if errors.Is(err, blobtier.ErrNotFound) || errors.Is(err, blobtier.ErrCorrupt) {
		err = fmt.Errorf("%w: %w", localseg.ErrNoCopy, err)
	}
	return data, m.XXH64, err // Get verified the bytes' xxh64 against m
}
