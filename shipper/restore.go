package shipper

import (
	"context"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
)

// Restore rebuilds shard from the bucket (given as b, else opened from
// url: OpenBucket) into the empty dir (coldload.Restore), then records the
// bucket in dir (RecordBucket), so the restored store ships there.
func Restore(ctx context.Context, url string, b blobtier.Bucket, shard uint32, dir string, o coldload.Options) (coldload.Report, error) {
	bk, closeB, err := OpenBucket(ctx, url, b)
	if err != nil {
		return coldload.Report{}, err
	}
	defer closeB()
	rep, err := coldload.Restore(ctx, bk, shard, dir, o)
	if err != nil {
		return rep, err
	}
	return rep, RecordBucket(o.Store.FS, dir, url)
}

// Verify checks every object of the bucket (given as b, else opened from
// url: OpenBucket) with coldload.Verify.
func Verify(ctx context.Context, url string, b blobtier.Bucket, opts coldload.VerifyOptions) (coldload.VerifyReport, error) {
	bk, closeB, err := OpenBucket(ctx, url, b)
	if err != nil {
		return coldload.VerifyReport{}, err
	}
	defer closeB()
	return coldload.Verify(ctx, bk, opts)
}
