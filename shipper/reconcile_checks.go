package shipper

import (
	"fmt"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// verifiedBefore reports whether a running uploader read segment seg's
// object back intact before, so Open need not download it again: the
// cursor object's shipped_through (shipped) reaches past it, and no tail
// object overlapping it is left (tails are the ones above the base). The
// shipped position moves over a segment only by a tail object, which tail
// cleanup deletes only once a segment read back intact covers it, or by
// the segment itself once it was read back intact; so a segment whose
// read-back never succeeded is either above shipped or still overlapped by
// its tail objects, and is read back at start.
func verifiedBefore(seg localseg.SegmentInfo, shipped uint64, tails []blobtier.Key) bool {
	if seg.LastSeq > shipped {
		return false
	}
	for _, k := range tails {
		if k.FirstSeq <= seg.LastSeq && k.LastSeq >= seg.FirstSeq {
			return false
		}
	}
	return true
}

// adoptable checks, without changing anything, that the local store can
// adopt the bucket's watermark wm (above its own reclaim base): segment
// wm.Segment is a sealed local segment whose last event is wm.Seq.
func adoptable(snap localseg.Snapshot, wm watermark.Mark) error {
	if wm.Seq > snap.Tip {
		return fmt.Errorf("%w: the bucket's watermark reclaimed through sequence %d (segment %d), the local store holds through %d", ErrStaleDisk, wm.Seq, wm.Segment, snap.Tip)
	}
	for i, seg := range snap.Segments {
		if seg.ID != wm.Segment {
			continue
		}
		if i == len(snap.Segments)-1 || !seg.Sealed {
			return fmt.Errorf("%w: the bucket's watermark reclaimed through segment %d, the local store's active segment", ErrDiverged, wm.Segment)
		}
		if seg.LastSeq != wm.Seq {
			return fmt.Errorf("%w: the bucket's watermark ends segment %d at sequence %d, the local store at %d", ErrDiverged, wm.Segment, wm.Seq, seg.LastSeq)
		}
		return nil
	}
	return fmt.Errorf("%w: the bucket's watermark reclaimed through segment %d (sequence %d), a segment the local store does not hold", ErrDiverged, wm.Segment, wm.Seq)
}

// repairTarget is the mark a damaged watermark is rewritten with: the
// local reclaim base, raised to the last local sealed segment that ends
// below lowRetained (the lowest sequence the bucket still holds above the
// base, or one past the cursor object's shipped_through when it holds
// nothing). Every sequence below lowRetained is gone from the bucket, so
// the real watermark was at least there: a stale disk's lower base never
// moves the mark backward. (Gone means reclaimed: the uploader deletes its
// own damaged segment object after tail objects hold its events, bridge.go,
// so that delete leaves no hole below lowRetained unless those puts and
// its put again all fail.)
func repairTarget(snap localseg.Snapshot, lowRetained uint64) (seq, segment uint64) {
	seq, segment = snap.ReclaimedSeq, snap.ReclaimedSeg
	for _, seg := range snap.Segments {
		if !seg.Sealed || seg.LastSeq >= lowRetained {
			break
		}
		seq, segment = seg.LastSeq, seg.ID
	}
	return seq, segment
}
