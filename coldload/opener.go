package coldload

import (
	"context"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
)

// Opener opens the read-only view of a shard a writable store does not
// own, for one read: a cold load from b (OpenCold), or without a bucket (b
// nil) local's view of the shard's local directory.
func Opener(b blobtier.Bucket, local affinity.ColdReader) affinity.ColdOpener {
	return func(ctx context.Context, shard int) (affinity.Reader, error) {
		if b == nil {
			return local(shard)
		}
		c, err := OpenCold(ctx, b, uint32(shard))
		if err != nil {
			return nil, err // not a typed nil *Cold
		}
		return c, nil
	}
}
