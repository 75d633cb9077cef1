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
		if o.GC.Enabled && o.GC.Interval > 0 && !o.NoBackground {
			bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
			l.cancel = cancel
			l.wg.Add(1)
			go func() { defer l.wg.Done(); l.localGCLoop(bg) }()
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
		Policy:             l.policy(),
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

// Append appends one event of an execution this shard owns. It returns once
// the event is durable on the local disk (and, in synchronous mode, in the
// bucket — or ErrNotInBucket with the result after the bounded wait).
func (l *Log) Append(ctx context.Context, ev localseg.Event) (localseg.AppendResult, error) {
	start := time.Now()
	res, err := l.appendOne(ctx, ev)
	l.m.Op(metrics.OpAppend, outcome(err))
	if err == nil || errors.Is(err, ErrNotInBucket) {
		l.m.AppendSeconds.Observe(time.Since(start).Seconds())
	}
	return res, err
}

func (l *Log) appendOne(ctx context.Context, ev localseg.Event) (localseg.AppendResult, error) {
	if err := l.writable(); err != nil {
		return localseg.AppendResult{}, err
	}
	if err := l.stoppedWriting(); err != nil {
		return localseg.AppendResult{}, err
	}
	res, err := l.route.Append(ev)
	l.noteErr(err)
	if err != nil {
		return res, err
	}
	if l.ship != nil {
		l.ship.NoteAppended()
		if l.opts.SyncToBucket {
			return res, l.ship.WaitShipped(ctx, res.Seq)
		}
	}
	return res, nil
}

// BatchResult is the outcome of AppendBatch.
type BatchResult struct {
	Appended      int    `json:"appended"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
}

// AppendBatch validates every event (identity, size, ownership) before any
// is written, then appends them as one durable group. A crash in the middle
// of writing a batch may leave an unacknowledged prefix.
func (l *Log) AppendBatch(ctx context.Context, evs []localseg.Event) (BatchResult, error) {
	start := time.Now()
	res, err := l.appendBatch(ctx, evs)
	l.m.Op(metrics.OpAppend, outcome(err))
	if err == nil || errors.Is(err, ErrNotInBucket) {
		l.m.AppendSeconds.Observe(time.Since(start).Seconds())
	}
	return res, err
}

func (l *Log) appendBatch(ctx context.Context, evs []localseg.Event) (BatchResult, error) {
	if err := l.writable(); err != nil {
		return BatchResult{}, err
	}
	if len(evs) == 0 {
		return BatchResult{}, fmt.Errorf("%w: empty batch", localseg.ErrInvalidInput)
	}
	if err := l.stoppedWriting(); err != nil {
		return BatchResult{}, err
	}
	first, last, err := l.route.AppendBatch(evs)
	l.noteErr(err)
	if err != nil {
		return BatchResult{}, err
	}
	res := BatchResult{Appended: len(evs), FirstSequence: first, LastSequence: last}
	if l.ship != nil {
		l.ship.NoteAppended()
		if l.opts.SyncToBucket {
			return res, l.ship.WaitShipped(ctx, last)
		}
	}
	return res, nil
}

// Scan pages through the owned shard's log after a sequence.
func (l *Log) Scan(after uint64, limit int) (localseg.Page, error) {
	if err := l.check(); err != nil {
		return localseg.Page{}, err
	}
	p, err := l.store.Scan(after, limit)
	l.m.Op(metrics.OpScan, outcome(err))
	return p, err
}

// ReadResult is a read with who served it.
type ReadResult = affinity.ReadResult

// ReadExecution reads an execution's events. The owner serves them from its
// store; an execution of another shard is served by a read-only cold load
// (from the bucket when one is configured).
func (l *Log) ReadExecution(executionID string, after uint64, limit int) (ReadResult, error) {
	if err := l.check(); err != nil {
		return ReadResult{}, err
	}
	var res ReadResult
	var err error
	if l.route != nil {
		res, err = l.route.Read(executionID, after, limit)
	} else {
		var p localseg.Page
		p, err = l.store.ReadExecution(executionID, after, limit)
		res = ReadResult{Page: p, Shard: l.own.Index, ServedBy: affinity.ServedByOwnerResident}
	}
	l.m.Op(metrics.OpRead, outcome(err))
	return res, err
}

// ScanShard scans any shard: the owned one locally, another by a read-only
// cold load.
func (l *Log) ScanShard(shard int, after uint64, limit int) (ReadResult, error) {
	if err := l.check(); err != nil {
		return ReadResult{}, err
	}
	if shard == l.own.Index || l.route == nil {
		p, err := l.Scan(after, limit)
		return ReadResult{Page: p, Shard: l.own.Index, ServedBy: affinity.ServedByOwnerResident}, err
	}
	res, err := l.route.ScanShard(shard, after, limit)
	l.m.Op(metrics.OpScan, outcome(err))
	return res, err
}

// Pull returns up to limit events after consumer's cursor, creating the
// consumer on its first pull of a non-empty shard.
func (l *Log) Pull(consumer string, limit int) (localseg.PullResult, error) {
	if err := l.writable(); err != nil {
		return localseg.PullResult{}, err
	}
	if err := l.stoppedWriting(); err != nil {
		// A pull of an existing consumer writes nothing and is still
		// served; one that would create the consumer is refused.
		snap, serr := l.store.Snapshot()
		if serr != nil {
			return localseg.PullResult{}, serr
		}
		if _, ok := snap.Consumers[consumer]; !ok {
			l.m.Op(metrics.OpPull, outcome(err))
			return localseg.PullResult{}, err
		}
	}
	res, err := l.route.Pull(l.own.Index, consumer, limit)
	l.noteErr(err)
	l.m.Op(metrics.OpPull, outcome(err))
	return res, err
}

// Ack moves consumer's cursor forward to seq.
func (l *Log) Ack(consumer string, seq uint64) (uint64, error) {
	if err := l.writable(); err != nil {
		return 0, err
	}
	if err := l.stoppedWriting(); err != nil {
		l.m.Op(metrics.OpAck, outcome(err))
		return 0, err
	}
	acked, err := l.route.Ack(l.own.Index, consumer, seq)
	l.noteErr(err)
	l.m.Op(metrics.OpAck, outcome(err))
	return acked, err
}

// DeleteConsumer removes a consumer, so it no longer holds GC back.
func (l *Log) DeleteConsumer(consumer string) error {
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.stoppedWriting(); err != nil {
		l.m.Op(metrics.OpConsumerDelete, outcome(err))
		return err
	}
	err := l.route.DeleteConsumer(l.own.Index, consumer)
	l.noteErr(err)
	l.m.Op(metrics.OpConsumerDelete, outcome(err))
	return err
}

// Health reports readiness: recovered, hydrated, not poisoned, and (with a
// bucket) shipping. The reason says what is wrong.
func (l *Log) Health() (ready bool, reason string) {
	switch {
	case l.closed.Load():
		return false, "closed"
	case l.poisoned.Load():
		return false, "store poisoned by a write or fsync error; restart to recover"
	}
	if l.ship != nil {
		if err := l.ship.Health(); err != nil {
			return false, err.Error()
		}
	}
	return true, ""
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

// dirIsEmptyStore reports whether dir holds no store yet: no segment file
// and no reclaim manifest.
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
		if strings.HasPrefix(n, "seg-") || n == "reclaim.json" {
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

// ShippedThrough is the highest sequence the bucket holds contiguously as
// far as this process knows (0 without a bucket). In asynchronous mode an
// event above it would be lost with the local disk.
func (l *Log) ShippedThrough() uint64 {
	if l.ship == nil {
		return 0
	}
	return l.ship.ShippedThrough()
}

// localGCLoop is the periodic GC of a store without a bucket: seal what is
// due by age (only sealed segments can be reclaimed), then reclaim.
func (l *Log) localGCLoop(ctx context.Context) {
	t := time.NewTicker(l.opts.GC.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := l.store.SealIfDue(); err != nil {
			l.noteErr(err)
			l.log.Error("seal by age failed", "err", err)
			continue
		}
		if _, err := l.localGC(l.policy()); err != nil {
			l.log.Error("periodic GC failed", "err", err)
		}
	}
}
