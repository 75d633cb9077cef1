package bucketlog

import (
	"context"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/shipper"
)

// ShipReport is the outcome of one shipping pass.
type ShipReport = shipper.ShipReport

// UploadReport counts one upload pass.
type UploadReport = shipper.UploadReport

// Ship runs one shipping pass now: seal what is due (everything with
// sealActive), upload sealed segments, ship the tail and the cursor object,
// and clean up superseded tail objects.
func (l *Log) Ship(ctx context.Context, sealActive bool) (ShipReport, error) {
	if err := l.writable(); err != nil {
		return ShipReport{Shard: l.own.Index}, err
	}
	if l.ship == nil {
		return ShipReport{Shard: l.own.Index}, usagef("ship needs a bucket")
	}
	return l.ship.Ship(ctx, sealActive)
}

// Tick runs, now, the pass the periodic tick of a log with background work
// runs (Ship without sealing the active segment; the cursor object's
// shipped_through is written at most once per four ticks unless the
// consumers changed), for a caller that drives a log opened with
// NoBackground on its own clock.
func (l *Log) Tick(ctx context.Context) (ShipReport, error) {
	if err := l.writable(); err != nil {
		return ShipReport{Shard: l.own.Index}, err
	}
	if l.ship == nil {
		return ShipReport{Shard: l.own.Index}, usagef("tick needs a bucket")
	}
	return l.ship.Tick(ctx)
}

// RestoreOptions configure Restore.
type RestoreOptions struct {
	BucketURL string
	Bucket    Bucket // instead of BucketURL (the caller keeps it)
	Shard     int
	// Dir is the root directory; the shard is restored into Dir/shard-NNNN,
	// which must not hold a store.
	Dir          string
	AllowPartial bool
	AllowEmpty   bool
	// AllowWatermarkAhead takes a reclaim watermark the bucket's objects
	// do not support (coldload.ErrWatermarkAhead) as it is.
	AllowWatermarkAhead bool
	Concurrency         int
	Progress            func(RestoreProgress)
	FS                  FS
	LazyBytes           int64 // > 0: a lazy restore keeping the newest segments within it local (coldload.Options.Lazy)
}

// Restore rebuilds one shard from the bucket alone into an empty directory
// (docs/FORMAT.md §9) and records the bucket in it, so the restored store
// ships there. A gap, a short restore, an empty bucket, a watermark the
// objects do not support and a non-empty target are invalid states (exit
// 3); a corrupt object or a conflict is a storage error naming the key
// (exit 5).
func Restore(ctx context.Context, o RestoreOptions) (RestoreReport, error) {
	if o.Dir == "" {
		return RestoreReport{}, usagef("restore needs --dir")
	}
	if o.Shard < 0 {
		return RestoreReport{}, usagef("shard %d is negative", o.Shard)
	}
	return shipper.Restore(ctx, o.BucketURL, o.Bucket, uint32(o.Shard), localseg.ShardDir(o.Dir, o.Shard), coldload.Options{
		Concurrency:         o.Concurrency,
		AllowPartial:        o.AllowPartial,
		AllowEmpty:          o.AllowEmpty,
		AllowWatermarkAhead: o.AllowWatermarkAhead,
		Progress:            o.Progress,
		Store:               localseg.Options{FS: o.FS}, Lazy: o.LazyBytes > 0, LocalBytes: o.LazyBytes,
	})
}

// Verify checks every object of a bucket (the checks of docs/FORMAT.md §9.2): length, digest
// and frames of each object, and each shard's segments contiguous above its
// watermark.
func Verify(ctx context.Context, bucketURL string, b blobtier.Bucket, opts VerifyOptions) (VerifyReport, error) {
	return shipper.Verify(ctx, bucketURL, b, opts)
}
