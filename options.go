package bucketlog

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/logopts"
)

// Defaults of Options. Each is what a zero field means.
const (
	DefaultDir                 = logopts.DefaultDir
	DefaultSegmentMaxBytes     = logopts.DefaultSegmentMaxBytes
	DefaultSealMaxAge          = logopts.DefaultSealMaxAge
	DefaultTailInterval        = logopts.DefaultTailInterval
	DefaultSyncWait            = logopts.DefaultSyncWait
	DefaultShutdownShip        = logopts.DefaultShutdownShip
	DefaultMinRetainedSegments = logopts.DefaultMinRetainedSegments
	DefaultUploadRetryMax      = logopts.DefaultUploadRetryMax
	DefaultStartupTimeout      = logopts.DefaultStartupTimeout
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
	// tail ticker and GC task (one-shot commands drive them by hand); a
	// scan's read-ahead of evicted segments runs within the call.
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
	// BucketWarnInterval spaces the WARN lines of a bucket failure streak
	// (the first failure, then one line per interval with the count;
	// default 1m).
	BucketWarnInterval time.Duration

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
	// DisableFenceFreshAck: no fresh fence check before an async append (docs/FORMAT.md §6.9).
	DisableFenceFreshAck bool

	// FS replaces the operating system's filesystem (tests).
	FS FS
	// Now replaces time.Now (tests).
	Now func() time.Time

	// LocalRetentionBytes > 0 bounds the sealed segments on the local disk
	// (needs a bucket): the oldest ones durable in the bucket leave it and
	// are read from the bucket (localseg/doc.go, Eviction). 0 keeps
	// everything. RemoteCacheBytes bounds the fetched segments kept in
	// memory (default 64 MiB).
	LocalRetentionBytes, RemoteCacheBytes int64
}

// GCOptions configure segment reclamation (docs/FORMAT.md §8): Enabled
// turns on the periodic reclaim task (with Interval > 0), Interval is the
// time between periodic passes (0: no periodic task), MinRetainedSegments
// the floor, the active segment included (default 2), MaxRetainedSegments
// enables keep-last-N retention (0: consumer interest only).
type GCOptions = logopts.GC

// resolved returns a copy with defaults applied, or an error for values no
// default can repair (logopts.Resolve).
func (o Options) resolved() (Options, error) {
	r, err := logopts.Resolve(logopts.Options(o))
	return Options(r), err
}

func (o Options) hasBucket() bool { return logopts.Options(o).HasBucket() }
