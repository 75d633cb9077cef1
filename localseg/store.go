package localseg

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// segment is one retained segment file.
type segment struct {
	id     uint64
	size   int64  // logical size: the durable frames, without preallocated zeros
	first  uint64 // sequence of its first event; 0 when it has none (yet)
	known  bool   // first is known (false until probed after an O(1) open)
	sealed bool   // has a successor; immutable
	f      File   // the writer's handle (active segment of a writable store)
	// ixb builds the segment's index file while the writer fills it; nil
	// unless this process wrote it from its first byte. Only the holder
	// of the writer role touches it.
	ixb *segIdxBuilder
	// guess: evicted by a lazy hydrate with its first event not known
	// (FirstUnknown): first reads 0, and infosLocked reports it empty
	// until a read resolves it (lazyindex.go).
	guess bool
}

// headConsumer is a consumer as the frames queued so far leave it.
type headConsumer struct {
	cursor uint64
	gen    uint64 // the group carrying its latest change
}

// item is one frame of a group.
type item struct {
	start, end int // the frame in batch.buf
	kind       FrameKind
	seq        uint64
	name       string // execution id or consumer
	esc        bool   // an event whose body holds an escape
	// Placed by the writer.
	seg *segment
	off int64
}

// batch is a group of frames that share one write and one fdatasync.
type batch struct {
	gen   uint64
	buf   []byte
	items []item
	// Wake-ups, made by the first waiter that needs one (a lone appender
	// that leads its own group allocates neither): done is closed when the
	// group is durable or failed; lead is closed to wake the appender
	// parked to lead the group (see await). Guarded by Store.mu.
	done chan struct{}
	lead chan struct{}
}

func (b *batch) reset(gen uint64) {
	b.gen = gen
	if cap(b.buf) > 4*DefaultSegmentMaxBytes {
		b.buf = nil // a huge batch once should not pin its buffer forever
	}
	b.buf = b.buf[:0]
	clear(b.items) // drop the references to callers' strings
	b.items = b.items[:0]
}

// wakeLeader wakes the appender parked to lead b, if any.
func (b *batch) wakeLeader() {
	if b.lead != nil {
		close(b.lead)
		b.lead = nil
	}
}

// wakeAll wakes every appender waiting for b: it completed or failed.
func (b *batch) wakeAll() {
	b.wakeLeader()
	if b.done != nil {
		close(b.done)
		b.done = nil
	}
}

// Store is one shard's durable segment log. It is safe for concurrent use:
// appends, consumer operations and reads may run from any number of
// goroutines. See the package documentation for the locking design.
type Store struct {
	dir      string
	fs       FS
	readOnly bool
	maxSeg   int64
	prealloc bool
	sealAge  time.Duration
	shard    ShardPair
	// shardRecorded: shard.json records shard (see shardpair.go).
	shardRecorded bool
	now           func() time.Time
	log           *slog.Logger
	obs           Observer
	lock          io.Closer
	report        OpenReport
	readers       readerCache
	ev            evictState // evicted segments and their fetched bytes (evict.go, remote.go)
	hl            healState  // replacing corrupt sealed segments from the bucket (heal.go)
	// deferCleanup: Options.DeferCleanup; deferred is what recovery left
	// for RemoveLeftovers.
	deferCleanup bool
	deferred     *cleanup
	// resolveFirsts: Options.ResolveFirsts on a writable open.
	resolveFirsts bool

	// unsafeRetryFsync, set only by a RED control test, retries a failed
	// fsync once and acknowledges when the retry succeeds: the behaviour
	// the poison rule exists to forbid.
	unsafeRetryFsync atomic.Bool
	// replayRuns counts replays (at open, or building the index); tests
	// check an O(1) open does none.
	replayRuns atomic.Int64
	tipA       atomic.Uint64
	notice     tipNotice // closed and replaced when tipA moves (notify.go)

	// genDoneA mirrors genDone, so an appender woken by its group's
	// completion learns its outcome without taking mu again.
	genDoneA atomic.Uint64

	mu   sync.Mutex
	cond sync.Cond // the writer role was released, an index build ended

	closed  bool
	poison  error
	writing bool // someone holds the writer role (a group leader, Seal, Reclaim, Close)
	// heir is the group whose parked leader was handed the writer role by
	// the previous leader (0: none); roleWaiters counts Seal, Reclaim and
	// Close waiting for the role, which a leader then releases instead of
	// handing it on.
	heir        uint64
	roleWaiters int

	// Head state: what the frames assigned so far (durable or queued)
	// leave. Guarded by mu.
	nextSeq  uint64
	headCons map[string]*headConsumer
	deleted  map[string]uint64 // consumers deleted lately (consumer.go: noteDeletedLocked)
	txns     *txWindow         // transaction ids queued or durable (txwindow.go); nil when off or read-only
	maxCons  int               // the consumers a pull may create (consumerlimit.go)
	pend     *batch
	spare    *batch
	flight   *batch // the group being written, nil when none
	genDone  uint64 // the last group whose fsync completed

	// Durable state: what completed fsyncs cover. Guarded by mu; changed
	// only by the holder of the writer role.
	tip          uint64
	reclaimedSeq uint64
	reclaimedSeg uint64
	jumps        []Jump // the recorded segment-id jumps (jumps.go)
	cons         map[string]uint64
	consNames    []string // sorted keys of cons
	segs         []*segment
	activeSince  time.Time

	// Read index, built lazily. Guarded by mu.
	idx         *index
	idxLoads    atomic.Int64 // sealed segments a replay took from their index files
	resolved    atomic.Int64 // pending evicted segments read on demand (lazyindex.go)
	idxObj      idxObjStats  // index objects fetched, used, refused (indexobj.go)
	idxBuilding bool
	idxErr      error
	reclaiming  bool

	// Checkpoint file; used only by the writer-role holder. ckptDirty
	// (guarded by mu) says the durable state moved since the checkpoint
	// was last encoded; ckptAt is when that was.
	ckpt      File
	ckptBuf   []byte
	ckptLen   int
	ckptDirty bool
	ckptAt    time.Time

	// The spare segment (spare.go), guarded by mu: prepared and fsynced
	// under its temporary name, or being prepared (spareBusy).
	spareSeg  File
	spareBusy bool
	// spareFailed is the active segment whose spare could not be
	// prepared (0: none); it is not tried again for that segment.
	spareFailed uint64
	// preallocFailures counts preparations and preallocations that
	// failed and were done without (tests).
	preallocFailures atomic.Int64

	// txStop is the damaged sealed segment the transaction window's
	// rebuild stopped at (0: none); guarded by mu.
	txStop uint64

	// latePoison is a failure after a group's fsync (the checkpoint of a
	// seal), applied once the group is published. Guarded by mu.
	latePoison error
}

func resolveOptions(opts Options) (_ Options, err error) {
	switch {
	case opts.SegmentMaxBytes == 0:
		opts.SegmentMaxBytes = DefaultSegmentMaxBytes
	case opts.SegmentMaxBytes < 0 || opts.SegmentMaxBytes > MaxSegmentBytes:
		return opts, fmt.Errorf("%w: segment max bytes %d: must be between 1 and %d", ErrInvalidInput, opts.SegmentMaxBytes, MaxSegmentBytes)
	}
	if opts.SealMaxAge < 0 {
		return opts, fmt.Errorf("%w: negative seal max age %v", ErrInvalidInput, opts.SealMaxAge)
	}
	if opts.MaxConsumers, err = consumerLimit(opts.MaxConsumers); err != nil {
		return opts, err
	}
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return opts, nil
}

// Open opens (creating when writable) the store in dir and recovers it as
// docs/FORMAT.md §4 describes. A writable open takes the directory's lock and fails
// at once with ErrLocked when another writer holds it. A read-only open
// takes no lock, writes nothing and serves what is on disk (a directory
// that does not exist reads as an empty store).
func Open(dir string, opts Options) (*Store, error) {
	opts, err := resolveOptions(opts)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s, err := open(dir, opts)
		// A read-only open races with a live writer, whose rollover can
		// land between the reads of its files (an index file listed
		// without its successor): evidence of a lost file is confirmed
		// by reading again.
		if err != nil && opts.ReadOnly && errors.Is(err, ErrLostState) && attempt < 2 {
			continue
		}
		return s, err
	}
}

func open(dir string, opts Options) (*Store, error) {
	s := &Store{
		dir:      dir,
		fs:       opts.FS,
		readOnly: opts.ReadOnly,
		maxSeg:   opts.SegmentMaxBytes,
		prealloc: !opts.NoPreallocate,
		sealAge:  opts.SealMaxAge,
		shard:    opts.Shard,
		now:      opts.Now,
		log:      opts.Logger,
		obs:      opts.Observer,
		headCons: make(map[string]*headConsumer),
		cons:     make(map[string]uint64),
		pend:     &batch{gen: 1},
		spare:    &batch{},
		txns:     newTxWindow(opts.TransactionWindow, opts.ReadOnly),
		maxCons:  opts.MaxConsumers,
	}
	s.deferCleanup = opts.DeferCleanup
	s.resolveFirsts = opts.ResolveFirsts && !opts.ReadOnly
	s.cond.L = &s.mu
	s.readers.init(s.fs, dir)
	s.ev.init(opts.Remote, opts.RemoteCacheBytes, opts.ReadAheadInline)
	s.readers.remote = s.remoteFile
	err := s.recover()
	if err == nil {
		err = s.recordShardPair()
	}
	if err == nil {
		err = s.rebuildTxWindow()
	}
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	s.nextSeq = s.tip + 1
	s.tipA.Store(s.tip)
	for name, c := range s.cons {
		s.headCons[name] = &headConsumer{cursor: c}
	}
	s.consNames = sortedNames(s.cons)
	s.activeSince = s.now()
	return s, nil
}

func (s *Store) segPath(id uint64) string { return filepath.Join(s.dir, SegmentFileName(id)) }

// Close flushes any queued frames (their appenders get their outcome) and
// writes the checkpoint when a group since the last one left it behind,
// then releases the files and the lock. Later calls fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	var err error
	if !s.readOnly {
		s.acquireWriterLocked()
		// Appenders may queue while a flush has s.mu released: flush
		// until nothing is queued, so nobody is left waiting once closed
		// is set (a failure poisons and wakes them all).
		for s.poison == nil && len(s.pend.items) > 0 {
			_ = s.flushLocked()
		}
		if s.poison == nil && s.ckptDirty {
			err = s.writeCheckpointLocked()
		}
		s.dropSpareLocked()
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.notice.release()
	s.ev.close()
	return errors.Join(err, s.closeFiles())
}

func (s *Store) closeFiles() error {
	var errs []error
	for _, seg := range s.segs {
		if seg.f != nil {
			errs = append(errs, seg.f.Close())
			seg.f = nil
		}
	}
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.Close())
		s.ckpt = nil
	}
	s.readers.closeAll()
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	return errors.Join(errs...)
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Tip is the highest durable sequence (the reclaim base when every event
// was reclaimed; 0 for an empty store).
func (s *Store) Tip() uint64 { return s.tipA.Load() }

// checkWritableLocked returns why the store refuses writes, if it does.
func (s *Store) checkWritableLocked() error {
	switch {
	case s.closed:
		return ErrClosed
	case s.readOnly:
		return ErrReadOnly
	case s.poison != nil:
		return s.poison
	}
	return s.repairPendingLocked()
}

// poisonLocked records the first write or fsync error. From then on every
// write fails until the store is reopened: after a failed fsync Linux may
// have dropped the dirty pages and report the next fsync as a success, so
// nothing written since the last good fsync may ever be acknowledged. The
// appenders of the queued group are woken to fail; nothing queued is
// written any more.
func (s *Store) poisonLocked(err error) {
	if s.poison == nil {
		s.poison = fmt.Errorf("%w: %w", ErrPoisoned, err)
		s.log.Error("localseg: store poisoned; appends fail until it is reopened", "dir", s.dir, "err", err)
	}
	s.pend.wakeAll()
}

// acquireWriterLocked takes the writer role for Seal, Reclaim or Close,
// waiting for the current holder; a group leader seeing roleWaiters
// releases the role instead of handing it to the next group's leader, so
// a steady stream of appends cannot starve them.
func (s *Store) acquireWriterLocked() {
	s.roleWaiters++
	for s.writing {
		s.cond.Wait()
	}
	s.roleWaiters--
	s.writing = true
}

// releaseWriterLocked gives up the writer role. The appender parked to
// lead the queued group, if any, is woken to take it.
func (s *Store) releaseWriterLocked() {
	s.writing = false
	s.cond.Broadcast()
	s.pend.wakeLeader()
}

// finishWriterLocked writes the checkpoint when the durable state moved
// past it, then releases the writer role (the end of Seal and Reclaim).
func (s *Store) finishWriterLocked() error {
	var err error
	if s.ckptDirty && s.poison == nil {
		err = s.writeCheckpointLocked()
	}
	s.releaseWriterLocked()
	return err
}

func (s *Store) active() *segment { return s.segs[len(s.segs)-1] }

// segByID returns the retained segment id, or nil.
func (s *Store) segByID(id uint64) *segment {
	if i, ok := s.segIndexOf(id); ok {
		return s.segs[i]
	}
	return nil
}

// datasync makes f's data durable, reporting the time to the observer.
func (s *Store) datasync(f File, full bool) error {
	start := time.Now()
	sync := f.Datasync
	if full {
		sync = f.Sync
	}
	err := sync()
	if err != nil && s.unsafeRetryFsync.Load() {
		// The broken behaviour, for the RED control only.
		err = sync()
	}
	if s.obs != nil {
		s.obs.Fsync(time.Since(start))
	}
	return err
}
