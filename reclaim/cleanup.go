package reclaim

import (
	"context"
	"fmt"

	"github.com/bucketlog/bucketlog/bucketview"
)

// CleanupResult reports one tail cleanup pass of a shard. The fields map to
// the metrics tail_objects_reclaimed_total, tail_reclaim_bytes_total,
// tail_reclaim_failed_total, the gauge tail_objects_retained and
// tail_objects_unparsed.
type CleanupResult struct {
	Reclaimed int   `json:"reclaimed"`
	Bytes     int64 `json:"bytes"` // sizes from the listing, taken before the delete
	Failed    int   `json:"failed"`
	// Retained counts the shard's tail objects still in the bucket after the
	// pass: those above the watermark and those whose delete failed. It is
	// reported as a gauge on purpose: a cleanup that deletes nothing and
	// one with nothing to delete both leave Reclaimed flat, while Retained
	// rising says seals or uploads have stalled.
	Retained int `json:"retained"`
	// Unparsed counts keys under the tail key space that do not parse (or
	// name another shard); they are never deleted.
	Unparsed int      `json:"unparsed"`
	Errors   []string `json:"errors,omitempty"`
	// Deleted lists the keys this pass deleted.
	Deleted []string `json:"-"`
}

// CleanupTail deletes the shard's tail objects that a durable segment
// already covers: those whose last sequence is at or below
// contiguousDurableSeq. With a bucket that holds rw, the caller passes the
// committed rw.durable_seq (docs/FORMAT.md §6.5), never a purely local mark;
// it is itself committed from watermark.Contiguous (never a maximum over the
// durable segments). Keys it does not understand
// are kept and counted. A failed delete is counted, the object counts as
// retained, and the next pass tries again; only a failed listing returns an
// error (with the counts so far).
//
// It takes no store and holds no lock: the listing, the sizing and the
// deletes all run outside whatever lock appends take.
func CleanupTail(ctx context.Context, b Deleter, shard uint32, contiguousDurableSeq uint64) (CleanupResult, error) {
	var res CleanupResult
	v, err := bucketview.Read(ctx, b, shard, bucketview.Options{Parts: bucketview.Tails})
	res.Unparsed = len(v.Unparsed)
	if err != nil {
		return res, err
	}
	for _, info := range v.TailObjects {
		if info.Parsed.LastSeq > contiguousDurableSeq {
			res.Retained++
			continue
		}
		if err := b.Delete(ctx, info.Key); err != nil {
			res.Failed++
			res.Retained++
			if len(res.Errors) < maxReportedErrors {
				res.Errors = append(res.Errors, fmt.Sprintf("delete %s: %v", info.Key, err))
			}
			continue
		}
		res.Reclaimed++
		res.Bytes += info.Size
		res.Deleted = append(res.Deleted, info.Key)
	}
	return res, nil
}
