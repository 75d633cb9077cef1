package bucketlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/internal/bucketrec"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/shipper"
)

// Log is one owned shard of the event log: the durable local store, and
// when a bucket is configured the uploader, the tail replicator and the GC
// task that ship it. It is safe for concurrent use.
type Log struct {
	opts  Options
	own   affinity.Ownership
	dir   string
	log   *slog.Logger
	m     *metrics.Shard
	store *localseg.Store
	cold  func(ctx context.Context, shard int) (affinity.Reader, error) // reads of other shards

	bucket blobtier.Bucket  // observed; nil without a bucket
	closeB func()           // closes a bucket opened from BucketURL
	ship   *shipper.Shipper // nil without a bucket or when read-only
	local  *shipper.Local   // GC of a writable store without a bucket

	poisoned atomic.Bool
	closed   atomic.Bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	openRep  OpenReport
}

// OpenReport says what Open found and did.
type OpenReport struct {
	Shard           int            `json:"shard"`
	Dir             string         `json:"dir"`
	Store           StoreReport    `json:"store"`
	Hydrated        bool           `json:"hydrated"`
	Hydrate         *RestoreReport `json:"hydrate,omitempty"`
	BucketTip       uint64         `json:"bucket_tip"`
	ShippedThrough  uint64         `json:"shipped_through"`
	DurableSegments int            `json:"durable_segments"`
	Watermark       uint64         `json:"watermark_seq"`
}

// Open opens the owned shard (docs/FORMAT.md §7.4): recover the local store → read the
// bucket's watermark and tip → hydrate an empty disk from the bucket →
// refuse a stale or diverged disk → start the uploader, the tail ticker and
// GC → ready. Without a bucket it is a durable local log.
func Open(ctx context.Context, opts Options) (*Log, error) {
	o, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	own := affinity.Ownership{Index: o.ShardIndex, Count: o.ShardCount}
	l := &Log{opts: o, own: own, dir: localseg.ShardDir(o.Dir, o.ShardIndex), log: o.Logger.With("shard", o.ShardIndex)}
	l.m, err = newMetrics(o.Registerer, o.ShardIndex)
	if err != nil {
		return nil, err
	}
	if err := l.openBucket(ctx); err != nil {
		return nil, err
	}
	if err := l.open(ctx); err != nil {
		l.closeBucket()
		return nil, err
	}
	return l, nil
}

func (l *Log) openBucket(ctx context.Context) error {
	if !l.opts.hasBucket() {
		return nil
	}
	b, closeB, err := openBucketFor(ctx, l.opts.BucketURL, l.opts.Bucket)
	if err != nil {
		return err
	}
	l.bucket, l.closeB = blobtier.Observe(b, l.m.BucketObserver()), closeB
	return nil
}

func (l *Log) closeBucket() {
	if l.closeB != nil {
		l.closeB()
	}
}

func (l *Log) open(ctx context.Context) error {
	o := l.opts
	rec, hasRec, err := bucketrec.Read(l.dir)
	if err != nil {
		return err
	}
	if hasRec && l.bucket != nil {
		if err := bucketrec.Check(l.dir, rec, bucketURLForRecord(o)); err != nil {
			return err
		}
	}
	if hasRec && l.bucket == nil && !o.ReadOnly && !o.NoBackground {
		return usagef("shard directory %s ships to %s: open it with that bucket", l.dir, rec.URL)
	}
	l.openRep = OpenReport{Shard: o.ShardIndex, Dir: l.dir}

	// An empty disk with a bucket is hydrated from the bucket first, so the
	// store opens over what the bucket holds.
	if l.bucket != nil && !o.ReadOnly {
		empty, err := dirIsEmptyStore(l.dir)
		if err != nil {
			return err
		}
		if empty {
			rep, err := coldload.Hydrate(ctx, l.bucket, uint32(o.ShardIndex), l.dir, coldload.Options{AllowEmpty: true, Store: localseg.Options{FS: o.FS, SegmentMaxBytes: o.SegmentMaxBytes}})
			if err != nil {
				return fmt.Errorf("hydrate shard %d from the bucket: %w", o.ShardIndex, err)
			}
			l.openRep.Hydrated = rep.Objects > 0
			l.openRep.Hydrate = &rep
			l.m.TailRecoveredRecords.Add(float64(rep.TailRecords))
			l.m.TailObjectsSuperseded.Add(float64(rep.TailSuperseded))
		}
	}

	storeOpts := localseg.Options{
		SegmentMaxBytes: o.SegmentMaxBytes,
		ReadOnly:        o.ReadOnly,
		FS:              o.FS,
		Now:             o.Now,
		Logger:          l.log,
	}
	if o.SealMaxAge > 0 {
		storeOpts.SealMaxAge = o.SealMaxAge
	}
	seals := shipper.NewSealSignal()
	storeOpts.Observer = storeObserver{fsync: l.m.FsyncSeconds, sealed: seals.Sealed}
	if o.ReadOnly {
		st, err := localseg.Open(l.dir, storeOpts)
		if err != nil {
			return fmt.Errorf("open shard %d read-only: %w", o.ShardIndex, err)
		}
		l.store = st
	} else {
		// The store records the pair it is written with and refuses
		// another (localseg shard.json): a configuration error.
		storeOpts.Shard = localseg.ShardPair{Index: l.own.Index, Count: l.own.Count}
		st, err := localseg.Open(l.dir, storeOpts)
		if errors.Is(err, localseg.ErrShardMismatch) {
			return fmt.Errorf("open owned %s: %w: %w", l.own, affinity.ErrConfig, err)
		}
		if err != nil {
			return fmt.Errorf("open owned %s: %w", l.own, err)
		}
		l.store = st
		l.cold = l.bucketColdReader
		if l.bucket == nil {
			storeOpts.Shard = localseg.ShardPair{}
			local := affinity.LocalColdReader(o.Dir, storeOpts)
			l.cold = func(_ context.Context, shard int) (affinity.Reader, error) { return local(shard) }
		}
	}
	l.openRep.Store = l.store.OpenReport()
	store := l.store
	l.m.WatchLag(func() (uint64, map[string]uint64) {
		snap, err := store.Snapshot()
		if err != nil {
			return 0, nil
		}
		return snap.Tip, snap.Consumers
	})
	if rep := l.openRep.Store; rep.TornTailBytes > 0 {
		l.log.Warn("torn tail repaired", "segment", rep.TornTailSegment, "bytes_dropped", rep.TornTailBytes)
	}

	if o.ReadOnly {
		return nil
	}
	if l.bucket == nil {
		l.local = shipper.NewLocal(l.store, l.shipperOptions(nil))
		if !o.NoBackground {
			bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
			l.cancel = cancel
			l.local.Start(bg, &l.wg)
		}
		return nil
	}
	s, err := shipper.New(ctx, l.store, l.bucket, l.shipperOptions(seals))
	if err != nil {
		l.m.Forget()
		l.closeStore()
		return err
	}
	l.ship = s
	found := s.Reconciled()
	l.openRep.BucketTip, l.openRep.ShippedThrough = found.BucketTip, found.ShippedThrough
	l.openRep.DurableSegments, l.openRep.Watermark = found.DurableSegments, found.Watermark
	if !hasRec {
		if err := bucketrec.Write(o.FS, l.dir, bucketrec.Record{URL: blobtier.Redact(bucketURLForRecord(o))}); err != nil {
			l.m.Forget()
			l.closeStore()
			return err
		}
	}
	if !o.NoBackground {
		bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
		l.cancel = cancel
		s.Start(bg, &l.wg)
	}
	return nil
}

// shipperOptions is what the shipper takes from the options.
func (l *Log) shipperOptions(seals shipper.SealSignal) shipper.Options {
	o := l.opts
	return shipper.Options{
		Shard:              uint32(o.ShardIndex),
		TailReplication:    !o.DisableTailReplication,
		DisableTailCleanup: o.DisableTailCleanup,
		TailInterval:       o.TailInterval,
		SyncWait:           o.SyncWait,
		StartupTimeout:     o.StartupTimeout,
		UploadRetryMax:     DefaultUploadRetryMax,
		Policy:             reclaim.Policy{Enabled: o.GC.Enabled, MinRetainedSegments: o.GC.MinRetainedSegments, MaxRetainedSegments: o.GC.MaxRetainedSegments},
		GCInterval:         o.GC.Interval,
		Sealed:             seals,
		Now:                o.Now,
		Logger:             l.log,
		Metrics:            l.m,
		NoteErr:            l.noteErr,
	}
}

func bucketURLForRecord(o Options) string {
	if o.BucketURL != "" {
		return o.BucketURL
	}
	return bucketrec.InjectedURL
}

func (l *Log) closeStore() {
	if l.store != nil {
		l.store.Close()
	}
}

// Close ships the tail one last time (bounded by ShutdownShipTimeout),
// stops every goroutine and closes the store.
func (l *Log) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	l.store.ReleaseWaiters() // waits end now, not after the last shipment
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	l.m.Forget()
	var errs []error
	if l.ship != nil {
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.ShutdownShipTimeout)
		if err := l.ship.Final(ctx); err != nil {
			errs = append(errs, fmt.Errorf("last shipment: %w", err))
		}
		cancel()
		l.ship.StopWaiters()
	}
	if l.store != nil {
		errs = append(errs, l.store.Close())
	}
	l.closeBucket()
	return errors.Join(errs...)
}

// Shard returns the owned shard index.
func (l *Log) Shard() int { return l.own.Index }

// Ownership returns the owned shard pair.
func (l *Log) Ownership() Ownership { return l.own }

// Dir returns the owned shard's directory.
func (l *Log) Dir() string { return l.dir }

// OpenReport returns what Open found and did.
func (l *Log) OpenReport() OpenReport { return l.openRep }

// Store returns the shard's segment store (for inspection and tools).
func (l *Log) Store() *localseg.Store { return l.store }

// Bucket returns the observed bucket (nil without one).
func (l *Log) Bucket() Bucket { return l.bucket }

func (l *Log) check() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// checkCtx is check for an operation that may reach the disk or the
// bucket: a cancelled ctx refuses it before it starts.
func (l *Log) checkCtx(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	return ctx.Err()
}

func (l *Log) writableCtx(ctx context.Context) error {
	if err := l.writable(); err != nil {
		return err
	}
	return ctx.Err()
}

func (l *Log) writable() error {
	if err := l.check(); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return fmt.Errorf("%w: %v", localseg.ErrReadOnly, "opened read-only")
	}
	return nil
}

// stoppedWriting is why the shard refuses every write: a second writer
// was detected (cmd/bucketlog/doc.go, Errors). Detection is not prevention: an event
// acknowledged here could never ship, so nothing more is acknowledged until
// the shard is reopened (which the bucket's state then decides).
func (l *Log) stoppedWriting() error {
	if l.ship == nil {
		return nil
	}
	return l.ship.Stopped()
}

func (l *Log) noteErr(err error) {
	if err != nil && errors.Is(err, localseg.ErrPoisoned) {
		l.poisoned.Store(true)
	}
}

// bucketColdReader serves a non-owner read from the bucket, read-only.
func (l *Log) bucketColdReader(ctx context.Context, shard int) (affinity.Reader, error) {
	st, cleanup, err := coldload.ReadOnly(ctx, l.bucket, uint32(shard), "")
	if err != nil {
		return nil, fmt.Errorf("cold load shard %d from the bucket: %w", shard, err)
	}
	return &coldStore{Store: st, cleanup: cleanup}, nil
}

type coldStore struct {
	*localseg.Store
	cleanup func()
}

func (c *coldStore) Close() error { c.cleanup(); return nil }

// dirIsEmptyStore reports whether dir holds no store yet: no segment file,
// no reclaim manifest, no checkpoint and no segment index file. A store
// that lost its segment files still holds its checkpoint (written once the
// first segment is durable): it is opened, and refused by the store as a
// lost state (issue 12, finding 9), not taken for an empty directory.
func dirIsEmptyStore(dir string) (bool, error) {
	is, err := localseg.IsStore(dir)
	return !is && err == nil, err
}

// ShipsToBucket reports whether the shard directory records a bucket.
func ShipsToBucket(dir string) (string, bool) {
	r, ok, _ := bucketrec.Read(dir)
	return r.URL, ok
}
