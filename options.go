package bucketlog

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/localseg"
)

// Defaults of Options. Each is what a zero field means.
const (
	DefaultDir                 = "bucketlog-data"
	DefaultSegmentMaxBytes     = localseg.DefaultSegmentMaxBytes
	DefaultSealMaxAge          = 15 * time.Minute
	DefaultTailInterval        = 15 * time.Second
	DefaultSyncWait            = 10 * time.Second
	DefaultShutdownShip        = 10 * time.Second
	DefaultMinRetainedSegments = 2
	DefaultUploadRetryMax      = 30 * time.Second
	DefaultStartupTimeout      = 30 * time.Second
)

// Options configure Open. The zero value opens shard 0 of 1 under
// DefaultDir with no bucket: a durable local log.
type Options struct {
	// Dir is the root directory; the owned shard lives in Dir/shard-NNNN.
	Dir string
	// ShardIndex and ShardCount name the one shard this process owns. Both
	// zero means shard 0 of 1. An invalid pair is an error, never a silent
	// fallback to shard 0.
	ShardIndex, ShardCount int

	// BucketURL is the bucket the shard ships to (s3://, gs://, mem://,
	// file:// for development). Empty: no bucket.
	BucketURL string
	// Bucket, when set, is used instead of opening BucketURL (tests, fault
	// injection). The caller keeps ownership: Close does not close it.
	Bucket Bucket

	// SegmentMaxBytes caps a segment file and object (default 8 MiB, at most
	// 15 MiB).
	SegmentMaxBytes int64
	// SealMaxAge seals a non-empty active segment after this long, so an
	// idle shard still ships sealed segments and tail objects stay bounded
	// (default 15m; negative: never by age).
	SealMaxAge time.Duration

	// TailInterval is the tail replication tick (default 15s). It is the
	// loss window: an event appended just after a tick exists only on the
	// local disk until the next tick ships it.
	TailInterval time.Duration
	// DisableTailReplication turns tail shipping off (it is on whenever a
	// bucket is configured).
	DisableTailReplication bool
	// SyncToBucket makes an append return only once the tail object that
	// covers it is in the bucket (or, after SyncWait, ErrNotInBucket). It
	// needs a bucket and tail replication: Open refuses it (ErrUsage)
	// with DisableTailReplication or without a bucket.
	SyncToBucket bool
	// SyncWait bounds how long a synchronous append waits (default 10s).
	SyncWait time.Duration
	// DisableTailCleanup keeps superseded tail objects (cleanup is on by
	// default).
	DisableTailCleanup bool

	// TransactionWindow is how many of the newest transaction ids an append
	// is checked against: a retry is answered, not written again (default
	// localseg.DefaultTransactionWindow; negative: off; localseg/txwindow.go).
	TransactionWindow int
	// MaxConsumers bounds the consumers a pull may create (default
	// localseg.DefaultMaxConsumers, 10,000; at most 50,000): beyond it 409.
	MaxConsumers int

	// GC configures segment reclamation.
	GC GCOptions

	// ReadOnly opens the shard without its writer lock for reads only; no
	// background work starts.
	ReadOnly bool
	// NoBackground opens a writable shard without starting the uploader,
	// tail ticker and GC task (one-shot commands drive them by hand).
	NoBackground bool

	// ShutdownShipTimeout bounds the last tail shipment of Close (default
	// 10s).
	ShutdownShipTimeout time.Duration
	// StartupTimeout bounds how long Open retries checking the bucket when
	// it is unreachable (default 30s). Open never skips the check: an
	// unchecked disk could be stale or diverged.
	StartupTimeout time.Duration
	// MaxUnshippedAge > 0: once the bucket has failed for longer than it and
	// the oldest unshipped event is older than it, the shard is not Ready;
	// with RefuseWhenUnshipped appends are then refused (ErrUnshippedBound,
	// storage). Off by default: a failing bucket alone never refuses.
	MaxUnshippedAge     time.Duration
	RefuseWhenUnshipped bool

	// Registerer receives the metrics (nil: none are exported).
	Registerer prometheus.Registerer
	// Logger receives structured logs (nil: slog.Default()).
	Logger *slog.Logger

	// RequireFencing refuses a bucket that cannot fence writers (no atomic
	// create-if-absent and compare-and-swap: file://, mem://) with ErrUsage
	// instead of running unfenced at epoch 0.
	RequireFencing bool
	// Takeover lets a one-shot open (NoBackground) take the shard over from
	// a disk whose owner epoch was superseded (moving it aside), instead of
	// refusing it.
	Takeover bool

	// FS replaces the operating system's filesystem (tests).
	FS FS
	// Now replaces time.Now (tests).
	Now func() time.Time
}

// GCOptions configure segment reclamation (docs/FORMAT.md §8).
type GCOptions struct {
	// Enabled turns on the periodic reclaim task (with Interval > 0).
	Enabled bool
	// Interval between periodic passes; 0 means no periodic task.
	Interval time.Duration
	// MinRetainedSegments is the floor, the active segment included
	// (default 2).
	MinRetainedSegments int
	// MaxRetainedSegments enables keep-last-N retention (0: consumer
	// interest only).
	MaxRetainedSegments int
}

// resolved returns a copy with defaults applied, or an error for values no
// default can repair.
func (o Options) resolved() (Options, error) {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.ShardIndex == 0 && o.ShardCount == 0 {
		o.ShardCount = 1
	}
	if o.ShardCount < 1 || o.ShardIndex < 0 || o.ShardIndex >= o.ShardCount {
		return o, fmt.Errorf("%w: shard index %d of count %d is not a valid pair", ErrUsage, o.ShardIndex, o.ShardCount)
	}
	// Contradictions are refused here, before Open touches the disk: a
	// synchronous append waits for a tail object, so it needs a bucket and
	// tail replication.
	switch {
	case o.SyncToBucket && o.DisableTailReplication:
		return o, fmt.Errorf("%w: synchronous mode (SyncToBucket) needs tail replication, which is disabled", ErrUsage)
	case o.SyncToBucket && !o.hasBucket() && !o.ReadOnly:
		return o, fmt.Errorf("%w: synchronous mode (SyncToBucket) needs a bucket", ErrUsage)
	}
	switch {
	case o.SegmentMaxBytes == 0:
		o.SegmentMaxBytes = DefaultSegmentMaxBytes
	case o.SegmentMaxBytes < 0 || o.SegmentMaxBytes > localseg.MaxSegmentBytes:
		return o, fmt.Errorf("%w: segment max bytes %d outside 1..%d", ErrUsage, o.SegmentMaxBytes, localseg.MaxSegmentBytes)
	}
	if o.SealMaxAge == 0 {
		o.SealMaxAge = DefaultSealMaxAge
	}
	if o.TailInterval <= 0 {
		o.TailInterval = DefaultTailInterval
	}
	if o.SyncWait <= 0 {
		o.SyncWait = DefaultSyncWait
	}
	if o.StartupTimeout <= 0 {
		o.StartupTimeout = DefaultStartupTimeout
	}
	if o.ShutdownShipTimeout <= 0 {
		o.ShutdownShipTimeout = DefaultShutdownShip
	}
	if o.GC.MinRetainedSegments <= 0 {
		o.GC.MinRetainedSegments = DefaultMinRetainedSegments
	}
	if o.GC.MaxRetainedSegments < 0 {
		return o, fmt.Errorf("%w: max retained segments %d is negative", ErrUsage, o.GC.MaxRetainedSegments)
	}
	if o.GC.MaxRetainedSegments > 0 && o.GC.MaxRetainedSegments < o.GC.MinRetainedSegments {
		// The floor wins: retention never keeps fewer than the floor.
		o.GC.MaxRetainedSegments = o.GC.MinRetainedSegments
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = localseg.OSFS{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

func (o Options) hasBucket() bool { return o.Bucket != nil || o.BucketURL != "" }
