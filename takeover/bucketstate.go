package takeover

import (
	"context"
	"fmt"

	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/fencing"
)

// The takeover reads the shard's claims and start records through
// bucketview.Read, the one function that reads a shard's bucket state (and
// holds the one rule for which keys are understood).

// listClaims lists the shard's claims: the highest claimed epoch (0: none)
// and every claimed epoch.
func listClaims(ctx context.Context, o Options) (uint64, map[uint64]bool, error) {
	v, err := bucketview.Read(ctx, o.Bucket, o.Shard, bucketview.Options{Parts: bucketview.Claims})
	if err != nil {
		return 0, nil, err
	}
	have := make(map[uint64]bool, len(v.ClaimObjects))
	for _, c := range v.ClaimObjects {
		have[c.Info.Parsed.Epoch] = true
	}
	return v.HighestClaim, have, nil
}

// readStarts lists and reads the shard's start records, every one of
// them (on the chain or off it). A record that does not decode or
// disagrees with its key is an error: no cut may extend a chain that
// cannot be read.
func readStarts(ctx context.Context, b bucketview.Bucket, shard uint32) ([]fencing.StartRecord, error) {
	v, err := bucketview.Read(ctx, b, shard, bucketview.Options{Parts: bucketview.StartRecords})
	if err != nil {
		return nil, err
	}
	recs := make([]fencing.StartRecord, 0, len(v.Starts))
	for _, so := range v.Starts {
		if so.Err != nil {
			return nil, fmt.Errorf("%s: %w", so.Info.Key, so.Err)
		}
		recs = append(recs, so.Record)
	}
	return recs, nil
}

// highestSegment is the highest segment id of any segment object of the
// shard (0: none), whatever its epoch: a cut's fence lies above it.
func highestSegment(ctx context.Context, o Options) (uint64, error) {
	v, err := bucketview.Read(ctx, o.Bucket, o.Shard, bucketview.Options{Parts: bucketview.Segments})
	if err != nil {
		return 0, err
	}
	var highest uint64
	for _, info := range v.SegmentObjects {
		highest = max(highest, info.Parsed.Segment)
	}
	return highest, nil
}
