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
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/logopts"
	"github.com/bucketlog/bucketlog/metrics"
	"github.com/bucketlog/bucketlog/shipper"
	"github.com/bucketlog/bucketlog/takeover"
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
	cold  affinity.ColdOpener // reads of other shards

	bucket blobtier.Bucket  // observed; nil without a bucket
	closeB func()           // closes a bucket opened from BucketURL
	ship   *shipper.Shipper // nil without a bucket or when read-only
	local  *shipper.Local   // GC of a writable store without a bucket
	fence  *takeover.Begun  // the open's claim (writer fencing); nil without a bucket

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
	l.m, err = metrics.NewShard(o.Registerer, o.ShardIndex, ErrUsage)
	if err != nil {
		return nil, err
	}
	l.closeB = func() {}
	if o.hasBucket() {
		b, closeB, err := shipper.OpenBucket(ctx, o.BucketURL, o.Bucket)
		if err != nil {
			return nil, err
		}
		l.bucket, l.closeB = blobtier.ObserveTimed(b, l.m.BucketObserver()), closeB
	}
	if err := l.open(ctx); err != nil {
		l.closeB()
		return nil, err
	}
	l.m.WatchPositions(func() (metrics.Positions, bool) {
		snap, err := l.store.Snapshot()
		return metrics.Positions{Tip: snap.Tip, ShippedThrough: l.ShippedThrough(), Base: snap.ReclaimedSeq + 1}, err == nil
	})
	return l, nil
}

func (l *Log) open(ctx context.Context) error {
	o := l.opts
	hasRec, err := shipper.CheckOpen(l.dir, l.bucket != nil, o.BucketURL, !o.ReadOnly && !o.NoBackground)
	if err != nil {
		return err
	}
	l.openRep = OpenReport{Shard: o.ShardIndex, Dir: l.dir}

	// The open's claim (package takeover) runs first; it hydrates an empty
	// disk from the bucket, so the store opens over what the bucket holds.
	if l.bucket != nil && !o.ReadOnly {
		hydrate := func(ctx context.Context, dir string) (coldload.Report, error) {
			return coldload.Hydrate(ctx, l.bucket, uint32(o.ShardIndex), dir, coldload.Options{AllowEmpty: true, Lazy: o.LocalRetentionBytes > 0, LocalBytes: o.LocalRetentionBytes, Store: localseg.Options{FS: o.FS, SegmentMaxBytes: o.SegmentMaxBytes}})
		}
		// A failed bucket request is retried for up to StartupTimeout; a
		// takeover cut short resumes from owner.json without a new claim.
		err := shipper.RetryStartup(ctx, o.StartupTimeout, l.log, "taking the shard over", func() (err error) {
			l.fence, err = takeover.Begin(ctx, takeover.Options{Shard: uint32(o.ShardIndex), Dir: l.dir, FS: o.FS, Bucket: l.bucket, Owner: takeover.DefaultOwner(),
				RequireFencing: o.RequireFencing, OneShot: o.NoBackground, Takeover: o.Takeover, Hydrate: hydrate, Logger: l.log})
			return err
		}, coldload.Transient)
		if err != nil {
			return fmt.Errorf("shard %d: %w", o.ShardIndex, err)
		}
		if rep := l.fence.Hydrated; rep != nil {
			l.openRep.Hydrated, l.openRep.Hydrate = rep.Objects > 0, rep
			l.m.ColdLoad(rep.TailRecords, rep.TailSuperseded, rep.ZombieObjects, len(rep.DamagedTails), len(rep.DamagedSegments))
		}
	}

	storeOpts := logopts.Options(o).Store(l.log)
	seals := shipper.NewSealSignal()
	storeOpts.Observer = seals.Observer(l.m.FsyncSeconds)
	storeOpts.Remote = shipper.RemoteSegments(l.bucket, uint32(o.ShardIndex))
	if o.ReadOnly {
		st, err := localseg.Open(l.dir, storeOpts)
		if err != nil {
			return fmt.Errorf("open shard %d read-only: %w", o.ShardIndex, err)
		}
		l.store = st
	} else {
		// With a bucket the store's deletions await shipper.New's verdict
		// (DeferCleanup; the Store report is read again after it).
		storeOpts.DeferCleanup = l.bucket != nil
		st, err := l.own.OpenStore(l.dir, storeOpts)
		if err != nil {
			return err
		}
		l.store = st
		cold := storeOpts
		cold.Remote = nil // another shard's evicted segments are not this shard's objects
		l.cold = coldload.Opener(l.bucket, affinity.LocalColdReader(o.Dir, cold))
	}
	l.openRep.Store = l.store.OpenReport()
	l.m.WatchStore(l.store)
	l.m.WatchRemote(o.LocalRetentionBytes, func() (localseg.RemoteStats, bool) { return l.store.RemoteStats(), true })
	if rep := l.openRep.Store; rep.TornTailBytes > 0 {
		l.log.Warn("torn tail repaired", "segment", rep.TornTailSegment, "bytes_dropped", rep.TornTailBytes)
	}

	if o.ReadOnly {
		return nil
	}
	if l.bucket == nil {
		l.local = shipper.NewLocal(l.store, l.shipperOptions(nil))
		l.background(ctx, l.local.Start)
		return nil
	}
	s, err := shipper.New(ctx, l.store, l.bucket, l.shipperOptions(seals))
	if err == nil && !hasRec {
		err = shipper.RecordBucket(o.FS, l.dir, o.BucketURL)
	}
	if err != nil {
		l.m.Forget()
		l.closeStore()
		return err
	}
	l.ship = s
	if err := l.fence.Finish(ctx, l.store, s.Listing()); err != nil { // the cut, before any append is accepted
		l.m.Forget()
		l.closeStore()
		return err
	}
	s.HealPending() // nothing refuses the open from here on
	found := s.Reconciled()
	l.openRep.BucketTip, l.openRep.ShippedThrough = found.BucketTip, found.ShippedThrough
	l.openRep.DurableSegments, l.openRep.Watermark, l.openRep.Store = found.DurableSegments, found.Watermark, l.store.OpenReport()
	l.background(ctx, s.Start)
	return nil
}

// background starts the shard's background work (unless NoBackground) on
// a context that outlives Open's and ends at Close.
func (l *Log) background(ctx context.Context, start func(context.Context, *sync.WaitGroup)) {
	if l.opts.NoBackground {
		return
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	start(bg, &l.wg)
}

// shipperOptions is what the shipper takes from the options.
func (l *Log) shipperOptions(seals shipper.SealSignal) shipper.Options {
	return shipper.OptionsFor(logopts.Options(l.opts), seals, l.log, l.m, l.noteErr, l.fence.Fencing(), l.fence.Epoch(), l.fence.Listing())
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
	l.store.ReleaseWaiters() // tip waits (Wait, Follow, PullWait) end now; sync appends after the last shipment
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	l.m.Forget()
	var errs []error
	if l.ship != nil {
		errs = append(errs, l.ship.Close(l.opts.ShutdownShipTimeout))
	}
	if l.store != nil {
		errs = append(errs, l.store.Close())
	}
	l.closeB()
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

func (l *Log) noteErr(err error) {
	if err != nil && errors.Is(err, localseg.ErrPoisoned) {
		l.poisoned.Store(true)
	}
}

// ShipsToBucket reports whether the shard directory records a bucket.
func ShipsToBucket(dir string) (string, bool) { return shipper.ShipsTo(dir) }
