package takeover

import (
	"context"

	"github.com/bucketlog/bucketlog/bucketview"
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
