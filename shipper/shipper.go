// Package shipper moves one shard's log into the bucket and keeps it there:
// it owns all shipping and GC state (which segments are durable, the
// shipped position, the watermark as last seen, the second-writer stop)
// and runs the tick and maintenance loops. It takes a narrow store
// interface, the bucket, typed metrics and a logger, and returns reports;
// the root package's Log opens it, routes to it and closes it.
//
// At start, a tail object of ours (its metadata names the local bytes) that
// reads back damaged neither fails Open nor counts as shipped: the rebuilt
// cursor stops below it and the next tick ships its events again from the
// local copy. Open does not delete it (a read damaged on the way looks the
// same); the tick's upload replaces it when its batch has the same key. A
// damaged tail object whose metadata names other bytes is a diverged
// history (ErrDiverged).
//
// A damaged cursor object is rebuilt from the owner's state, never below
// what the bucket's objects imply; while a segment object of ours read back
// damaged at start, the rebuild waits until the uploader put it again, and
// while a tail object of ours above the verified position did, until its
// events were shipped again (cursorhold.go), so a start after a stop reads
// them back again.
//
// At start, a live local consumer the bucket's cursor object shows deleted
// (a tombstone, or unlisted with no ConsumerCreate of it after the object's
// shipped_through event) is deleted locally: the disk is older than the
// deletion, e.g. an older copy of the volume (consumers.go).
//
// A failing bucket does not make the shard unready (Ready): appends stay
// durable on the local disk and ship when it answers; Health and Status
// report it, and the log has one WARN per failure streak (then one per
// BucketWarnInterval) and an INFO when it ends. Only MaxUnshippedAge, when
// set, turns a long outage into unreadiness (and, with RefuseWhenUnshipped,
// refused appends).
//
// Writer fencing (Options.Fencing, shipper/fence*.go): every object carries
// the writer's epoch; a tail batch commits, and a synchronous append is
// acknowledged, only after a HEAD of the next epoch's claim, sent after the
// put completed, found none; rw and cur are rewritten only while they carry
// no higher epoch. A newer claim puts the shipper in the fenced state for
// good (Fenced, fencing.ErrFenced): it never claims again by itself.
package shipper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// Shipper moves one shard's log into the bucket: sealed segments (the
// uploader), the unsealed tail (the tail replicator) and the cursor object;
// it also runs tail cleanup and GC. Its state comes from the bucket and the
// local files at start, never from memory alone.
//
// Two goroutines drive it: the tick loop (seal by age, tail shipping, the
// cursor object; kicked early by synchronous appends) and the maintenance
// loop (uploads on every seal and on retry, tail cleanup, GC). Neither holds
// a lock that appends take while it talks to the bucket: the store's own
// lock is taken only inside its brief calls (TailExtent, Snapshot, Seal,
// Reclaim's local steps).
type Shipper struct {
	o      Options
	log    *slog.Logger
	m      *metrics.Shard
	rec    Reconciled
	listed *bucketview.View // the bucket state the start-up checks judged (Listing)
	b      blobtier.Bucket
	shard  uint32
	store  Store
	repl   *tailbatch.Replicator
	tailOn bool
	sealed <-chan struct{}
	kick   chan struct{}
	// cleanupKick asks the maintenance loop for a tail cleanup: a tail
	// object landed that a durable segment already covers.
	cleanupKick chan struct{}

	// maint serialises uploads, cleanup and GC (the maintenance loop, Close
	// and one-shot commands).
	maint sync.Mutex

	mu             sync.Mutex
	durable        map[uint64]bool // sealed segment id → its object matches the local bytes
	indexRetry     map[uint64]bool // segments whose index object's put failed (indexobj.go)
	healing        map[uint64]bool // the start's segments damaged on the disk, replaced by their objects at HealPending (heal.go)
	wm             watermark.Mark  // the bucket's reclaim watermark as last read or written
	stopErr        error           // a second writer: shipping, GC and cleanup stopped
	uploadErr      error           // the latest segment upload failure (nil after a success)
	tailErr        error           // the latest tail or cursor shipment failure (nil after a success)
	cleanedThrough uint64          // contiguous durable seq at the last complete cleanup
	cleanupDirty   bool            // the last cleanup left something to retry
	sweptClean     bool            // the last GC pass swept or deleted everything it covered
	byKeyPasses    int             // periodic passes that deleted by key since the last sweep
	// pendingTails are the tail objects this process committed and no
	// cleanup has deleted yet (key → last sequence, misses): an object a
	// cleanup pass did not see (it landed, or became listable, after the
	// listing) keeps cleanup due for a few more passes.
	pendingTails  map[string]*pendingTail
	uploadBackoff time.Duration
	certified     uint64        // writer fencing: shipped through here before a HEAD that found no newer claim
	cursorAt      time.Time     // the start of the last pass that wrote (or tried to write) the cursor object (tail.go)
	shippedCh     chan struct{} // closed and replaced whenever the shipped position moves
	closing       bool          // Close released the synchronous waiters: none waits any more

	unshippedSince atomic.Int64 // unix nanos of the oldest append not yet shipped (0: none)
	watch          *bucketWatch // failure streaks, the last error and shipment (bucketstate.go)
	waiters        atomic.Int32
	background     bool // the tick loop runs (else synchronous appends ship themselves)

	// hold (guarded by mu) is a damaged cursor object start-up did not
	// rebuild yet (cursorhold.go); holdMu serialises its release.
	hold   *cursorHold
	holdMu sync.Mutex

	fresh freshState // the fresh check of asynchronous appends (fence_fresh.go)
}

// New checks the bucket against the local store (reconcile) and returns a
// shipper ready to start. The bucket must be checked before anything ships
// or the shard is ready: a transient failure is retried, with backoff, for
// up to StartupTimeout; a stale or diverged disk is refused at once.
func New(ctx context.Context, store Store, b blobtier.Bucket, o Options) (*Shipper, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NoteErr == nil {
		o.NoteErr = func(error) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		m, err := metrics.New(nil, int(o.Shard))
		if err != nil {
			return nil, err
		}
		o.Metrics = m
	}
	s := &Shipper{
		o: o, log: o.Logger, m: o.Metrics,
		b: b, shard: o.Shard, store: store,
		tailOn:       o.TailReplication,
		sealed:       o.Sealed,
		kick:         make(chan struct{}, 1),
		cleanupKick:  make(chan struct{}, 1),
		durable:      map[uint64]bool{},
		pendingTails: map[string]*pendingTail{},
		shippedCh:    make(chan struct{}),
		watch:        &bucketWatch{log: o.Logger, interval: o.BucketWarnInterval},
	}
	if s.watch.interval <= 0 {
		s.watch.interval = DefaultBucketWarnInterval
	}
	if o.Fencing {
		s.b = newEpochGuard(b, o.Shard, o.Epoch, s.markFenced, s.checkFence)
	}
	if err := RetryStartup(ctx, o.StartupTimeout, s.log, "checking the bucket", func() error { return s.reconcile(ctx) }, nil); err != nil {
		return nil, err
	}
	// The verdict let the open go on: only now does the store drop what its
	// recovery kept (localseg Options.DeferCleanup), so a refused open
	// changed no byte of the directory.
	if err := store.RemoveLeftovers(); err != nil {
		return nil, err
	}
	return s, nil
}

// Store is what the shipper needs from the shard's local store.
// *localseg.Store implements it.
type Store interface {
	Snapshot() (localseg.Snapshot, error)
	Tip() uint64
	ReadSegment(id uint64) ([]byte, error)
	ReadRange(segment uint64, off, n int64) ([]byte, error)
	TailExtent(afterSeq uint64, maxBytes int64) (localseg.Extent, bool, error)
	Reclaim(throughSegment uint64) (localseg.ReclaimResult, error)
	Seal() (bool, error)
	SealIfDue() (bool, error)
	// RemoveLeftovers deletes what a recovery opened with
	// localseg.Options.DeferCleanup kept (a no-op otherwise).
	RemoveLeftovers() error
}

var _ Store = (*localseg.Store)(nil)

// Options configure a Shipper.
type Options struct {
	Shard              uint32
	TailReplication    bool // ship the unsealed tail (else segments only)
	DisableTailCleanup bool
	TailInterval       time.Duration // the tick of seal-by-age and tail shipping
	// CursorInterval spaces the periodic tick's writes of the cursor
	// object (0: CursorTicks ticks): see tail.go, shipTailPass.
	CursorInterval time.Duration
	SyncWait       time.Duration // how long a synchronous append waits
	StartupTimeout time.Duration // how long New retries a failing bucket
	UploadRetryMax time.Duration // the longest pause between upload retries
	// Policy is the periodic GC policy; GCInterval > 0 with Policy.Enabled
	// runs it from the maintenance loop.
	Policy     reclaim.Policy
	GCInterval time.Duration
	// Sealed wakes the uploader (the store's seal hook: SealSignal).
	Sealed  SealSignal
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *metrics.Shard
	// NoteErr is told of every local store error (poison detection).
	NoteErr func(error)
	// MaxUnshippedAge > 0 makes the shard not ready (Ready) once the bucket
	// has failed for longer than it and the oldest unshipped event is older
	// than it; with RefuseWhenUnshipped appends are then refused
	// (Refusing). BucketWarnInterval spaces the WARN lines of a failure
	// streak (default DefaultBucketWarnInterval).
	MaxUnshippedAge     time.Duration
	RefuseWhenUnshipped bool
	BucketWarnInterval  time.Duration
	// Fencing turns on the writer's fencing checks (a bucket with
	// create-if-absent and compare-and-swap); Epoch is the writer's
	// ownership epoch, written on every object (0: unfenced).
	Fencing bool
	Epoch   uint64
	// Listed is the bucket state the open's takeover read after its claim
	// (its cold load's one listing: docs/FORMAT.md, "Writer fencing",
	// takeover step 6); the start-up reconcile judges the hydrated store
	// against it instead of listing again. nil: reconcile reads the bucket.
	Listed *bucketview.View
	// LocalRetentionBytes > 0 bounds the sealed segments kept on the local
	// disk: beyond it the oldest ones durable in the bucket are evicted
	// (evict.go). 0 keeps everything.
	LocalRetentionBytes int64
	// FenceFreshAck turns on the fresh check of asynchronous appends
	// (FreshAck, fence_fresh.go); FreshAckWait bounds an append's wait for
	// it (default DefaultFreshAckWait).
	FenceFreshAck bool
	FreshAckWait  time.Duration
}

// SealSignal is the store's seal hook: Sealed wakes the uploader without
// blocking the store.
type SealSignal chan struct{}

// NewSealSignal returns a seal hook for one shipper.
func NewSealSignal() SealSignal { return make(SealSignal, 1) }

// Sealed records that a segment was sealed.
func (c SealSignal) Sealed(localseg.SegmentInfo) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Reconciled is what the start-up check found (the root copies it into its
// OpenReport).
type Reconciled struct {
	BucketTip       uint64
	ShippedThrough  uint64
	DurableSegments int
	Watermark       uint64
}

// Errors of the shipper; the root package re-exports them. ErrStaleDisk
// and ErrDiverged are also localseg.ErrInvalidState.
var (
	// ErrUsage: a bad option, or a bucket unfit for what the store needs.
	ErrUsage = affinity.ErrUsage
	// ErrNotInBucket: synchronous mode only. The append is durable on the
	// local disk and keeps its sequence; the bucket did not confirm it
	// within the bounded wait. It ships later. A retry with the same
	// transaction id is safe: it is answered, not written again.
	ErrNotInBucket = errors.New("bucketlog: durable locally, not yet in the bucket")
	// ErrStaleDisk: the local store is behind what the bucket holds.
	ErrStaleDisk = fmt.Errorf("%w: local disk is behind the bucket", localseg.ErrInvalidState)
	// ErrDiverged: the local store and the bucket disagree on a sequence
	// both hold.
	ErrDiverged = fmt.Errorf("%w: local disk and bucket disagree", localseg.ErrInvalidState)
	// ErrSecondWriter: a different object already sits under one of this
	// shard's write-once keys; shipping, GC and cleanup stopped.
	ErrSecondWriter = errors.New("bucketlog: second writer detected on this shard")
)

func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
}

// Reconciled returns what the start-up check found.
func (s *Shipper) Reconciled() Reconciled { return s.rec }

// ShippedThrough is the highest sequence the bucket holds contiguously as
// far as this shipper knows.
func (s *Shipper) ShippedThrough() uint64 {
	if s == nil {
		return 0
	}
	return s.repl.ShippedThrough()
}

func (s *Shipper) noteErr(err error) {
	if err != nil {
		s.o.NoteErr(err)
	}
}

// Start runs the tick and maintenance loops until ctx ends (wg tracks
// them). Without it, synchronous appends ship the tail themselves.
func (s *Shipper) Start(ctx context.Context, wg *sync.WaitGroup) { s.start(ctx, wg) }

// Health is nil while the shard ships, else why not.
func (s *Shipper) Health() error { return s.health() }

// Stopped is the second-writer stop (nil while the shard ships, and on a
// nil Shipper). Detection is not prevention: an event acknowledged after
// it could never ship, so the root refuses every write until the shard is
// reopened (which the bucket's state then decides).
func (s *Shipper) Stopped() error {
	if s == nil {
		return nil
	}
	return s.stopped()
}

// IsDurable reports whether sealed segment id's object matches the local
// bytes.
func (s *Shipper) IsDurable(id uint64) bool { return s.isDurable(id) }

// NoteAppended records that an append is not yet shipped.
func (s *Shipper) NoteAppended() { s.noteAppended() }

// WaitShipped blocks a synchronous append until the bucket holds seq, or
// returns ErrNotInBucket after SyncWait.
func (s *Shipper) WaitShipped(ctx context.Context, seq uint64) error { return s.waitShipped(ctx, seq) }

// Final is Close's last shipment, bounded by ctx.
func (s *Shipper) Final(ctx context.Context) error { return s.final(ctx) }

// StopWaiters releases every synchronous appender (Close).
func (s *Shipper) StopWaiters() { s.stopWaiters() }
