package bucketlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
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
	route *affinity.Log
	store *localseg.Store

	bucket    blobtier.Bucket  // observed; nil without a bucket
	ownBucket bool             // opened from BucketURL: Close closes it
	ship      *shipper.Shipper // nil without a bucket or when read-only
	local     *shipper.Local   // GC of a writable store without a bucket

	poisoned atomic.Bool
	closed   atomic.Bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	openRep  OpenReport
}

// OpenReport says what Open found and did.
type OpenReport struct {
	Shard           int                 `json:"shard"`
	Dir             string              `json:"dir"`
	Store           localseg.OpenReport `json:"store"`
	Hydrated        bool                `json:"hydrated"`
	Hydrate         *coldload.Report    `json:"hydrate,omitempty"`
	BucketTip       uint64              `json:"bucket_tip"`
	ShippedThrough  uint64              `json:"shipped_through"`
	DurableSegments int                 `json:"durable_segments"`
	Watermark       uint64              `json:"watermark_seq"`
}

// bucketRecord is bucket.json: the store ships to this bucket.
type bucketRecord struct {
	URL string `json:"url"`
}

const bucketRecordName = "bucket.json"

// Open opens the owned shard (SPEC §7): recover the local store → read the
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
	o := l.opts
	switch {
	case o.Bucket != nil:
		l.bucket = o.Bucket
	case o.BucketURL != "":
		b, err := blobtier.Open(ctx, o.BucketURL, blobtier.Options{})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		l.bucket, l.ownBucket = b, true
	default:
		return nil
	}
	l.bucket = blobtier.Observe(l.bucket, l.m.BucketObserver())
	return nil
}

func (l *Log) closeBucket() {
	if l.ownBucket && l.bucket != nil {
		l.bucket.Close()
	}
}

func (l *Log) open(ctx context.Context) error {
	o := l.opts
	rec, hasRec, err := readBucketRecord(l.dir)
	if err != nil {
		return err
	}
	if err := l.checkBucketRecord(rec, hasRec); err != nil {
		return err
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
		cold := affinity.ColdReader(nil)
		if l.bucket != nil {
			cold = l.bucketColdReader
		}
		r, err := affinity.Open(o.Dir, l.own, affinity.Options{Store: storeOpts, ColdReader: cold})
		if err != nil {
			return err
		}
		l.route, l.store = r, r.Store()
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
		if err := writeBucketRecord(o.FS, l.dir, bucketRecord{URL: blobtier.Redact(bucketURLForRecord(o))}); err != nil {
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
	return "injected://bucket"
}

func (l *Log) closeStore() {
	if l.route != nil {
		l.route.Close()
	} else if l.store != nil {
		l.store.Close()
	}
}

// Close ships the tail one last time (bounded by ShutdownShipTimeout),
// stops every goroutine and closes the store.
func (l *Log) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
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
	if l.route != nil {
		errs = append(errs, l.route.Close())
	} else if l.store != nil {
		errs = append(errs, l.store.Close())
	}
	l.closeBucket()
	return errors.Join(errs...)
}

// Shard returns the owned shard index.
func (l *Log) Shard() int { return l.own.Index }

// Ownership returns the owned shard pair.
func (l *Log) Ownership() affinity.Ownership { return l.own }

// Dir returns the owned shard's directory.
func (l *Log) Dir() string { return l.dir }

// OpenReport returns what Open found and did.
func (l *Log) OpenReport() OpenReport { return l.openRep }

// Store returns the shard's segment store (for inspection and tools).
func (l *Log) Store() *localseg.Store { return l.store }

// Bucket returns the observed bucket (nil without one).
func (l *Log) Bucket() blobtier.Bucket { return l.bucket }

func (l *Log) check() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (l *Log) writable() error {
	if err := l.check(); err != nil {
		return err
	}
	if l.route == nil {
		return fmt.Errorf("%w: %v", localseg.ErrReadOnly, "opened read-only")
	}
	return nil
}

// stoppedWriting is why the shard refuses every write: a second writer
// was detected (SPEC §9). Detection is not prevention: an event
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
func (l *Log) bucketColdReader(shard int) (affinity.Reader, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
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
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "seg-") || n == "reclaim.json" || n == "checkpoint.json" || strings.HasSuffix(n, ".idx") {
			return false, nil
		}
	}
	return true, nil
}

func readBucketRecord(dir string) (bucketRecord, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, bucketRecordName))
	if errors.Is(err, fs.ErrNotExist) {
		return bucketRecord{}, false, nil
	}
	if err != nil {
		return bucketRecord{}, false, err
	}
	var r bucketRecord
	if err := json.Unmarshal(b, &r); err != nil {
		// A damaged record still says the store ships; never treat it as
		// "does not ship".
		return bucketRecord{URL: "(unreadable bucket.json)"}, true, nil
	}
	return r, true, nil
}

// ShipsToBucket reports whether the shard directory records a bucket.
func ShipsToBucket(dir string) (string, bool) {
	r, ok, _ := readBucketRecord(dir)
	return r.URL, ok
}

func writeBucketRecord(fsys localseg.FS, dir string, r bucketRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, bucketRecordName+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, bucketRecordName)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}
