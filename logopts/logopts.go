package logopts

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// Defaults (bucketlog's Default constants are these).
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

// Options is bucketlog.Options (same fields, same order, same types).
type Options struct {
	Dir                    string
	ShardIndex, ShardCount int
	BucketURL              string
	Bucket                 blobtier.Bucket
	SegmentMaxBytes        int64
	SealMaxAge             time.Duration
	TailInterval           time.Duration
	DisableTailReplication bool
	SyncToBucket           bool
	SyncWait               time.Duration
	DisableTailCleanup     bool
	TransactionWindow      int
	MaxConsumers           int
	GC                     GC
	ReadOnly               bool
	NoBackground           bool
	ShutdownShipTimeout    time.Duration
	StartupTimeout         time.Duration
	MaxUnshippedAge        time.Duration
	RefuseWhenUnshipped    bool
	BucketWarnInterval     time.Duration
	Registerer             prometheus.Registerer
	Logger                 *slog.Logger
	RequireFencing         bool
	Takeover               bool
	DisableFenceFreshAck   bool
	FS                     localseg.FS
	Now                    func() time.Time
	LocalRetentionBytes    int64
	RemoteCacheBytes       int64
}

// GC configures segment reclamation (docs/FORMAT.md §8); it is
// bucketlog.GCOptions.
type GC struct {
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

// HasBucket reports whether a bucket is configured (Bucket or BucketURL).
func (o Options) HasBucket() bool { return o.Bucket != nil || o.BucketURL != "" }

// Store is the local store's options for resolved options o, logging to
// log.
func (o Options) Store(log *slog.Logger) localseg.Options {
	return localseg.Options{
		SegmentMaxBytes:   o.SegmentMaxBytes,
		ReadOnly:          o.ReadOnly,
		FS:                o.FS,
		Now:               o.Now,
		Logger:            log,
		SealMaxAge:        max(o.SealMaxAge, 0), // negative: never by age
		TransactionWindow: o.TransactionWindow,
		MaxConsumers:      o.MaxConsumers,
		RemoteCacheBytes:  o.RemoteCacheBytes,
		ReadAheadInline:   o.NoBackground,
		// An owner reads every segment's range: a lazy hydrate's
		// unknown ones are resolved at its open (localseg).
		ResolveFirsts: !o.ReadOnly,
	}
}

// Resolve returns a copy with defaults applied, or an error (ErrUsage) for
// values no default can repair.
func Resolve(o Options) (Options, error) {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.ShardIndex == 0 && o.ShardCount == 0 {
		o.ShardCount = 1
	}
	if o.ShardCount < 1 || o.ShardIndex < 0 || o.ShardIndex >= o.ShardCount {
		return o, fmt.Errorf("%w: shard index %d of count %d is not a valid pair", affinity.ErrUsage, o.ShardIndex, o.ShardCount)
	}
	// Contradictions are refused here, before Open touches the disk: a
	// synchronous append waits for a tail object, so it needs a bucket and
	// tail replication.
	switch {
	case o.SyncToBucket && o.DisableTailReplication:
		return o, fmt.Errorf("%w: synchronous mode (SyncToBucket) needs tail replication, which is disabled", affinity.ErrUsage)
	case o.SyncToBucket && !o.HasBucket() && !o.ReadOnly:
		return o, fmt.Errorf("%w: synchronous mode (SyncToBucket) needs a bucket", affinity.ErrUsage)
	}
	switch {
	case o.SegmentMaxBytes == 0:
		o.SegmentMaxBytes = DefaultSegmentMaxBytes
	case o.SegmentMaxBytes < 0 || o.SegmentMaxBytes > localseg.MaxSegmentBytes:
		return o, fmt.Errorf("%w: segment max bytes %d outside 1..%d", affinity.ErrUsage, o.SegmentMaxBytes, localseg.MaxSegmentBytes)
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
		return o, fmt.Errorf("%w: max retained segments %d is negative", affinity.ErrUsage, o.GC.MaxRetainedSegments)
	}
	if o.GC.MaxRetainedSegments > 0 && o.GC.MaxRetainedSegments < o.GC.MinRetainedSegments {
		// The floor wins: retention never keeps fewer than the floor.
		o.GC.MaxRetainedSegments = o.GC.MinRetainedSegments
	}
	if o.LocalRetentionBytes < 0 || o.RemoteCacheBytes < 0 {
		return o, fmt.Errorf("%w: local retention bytes %d and remote cache bytes %d must not be negative", affinity.ErrUsage, o.LocalRetentionBytes, o.RemoteCacheBytes)
	}
	if o.LocalRetentionBytes > 0 && !o.HasBucket() && !o.ReadOnly {
		return o, fmt.Errorf("%w: a local retention budget (LocalRetentionBytes) needs a bucket: only segments durable in the bucket leave the disk", affinity.ErrUsage)
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
