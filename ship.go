package bucketlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// shipper moves one shard's log into the bucket: sealed segments (the
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
type shipper struct {
	l      *Log
	b      blobtier.Bucket
	shard  uint32
	store  *localseg.Store
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
	lastConsumers map[string]uint64
	shippedCh     chan struct{} // closed and replaced whenever the shipped position moves
	closing       bool          // Close released the synchronous waiters: none waits any more

	// cursorMu serialises syncCursor (the consumers snapshot and the cursor
	// object write): the tick loop, Close's last shipment, a one-shot Ship
	// and a synchronous append's own passes may overlap, and a later write
	// must never carry an older snapshot.
	cursorMu sync.Mutex

	unshippedSince atomic.Int64 // unix nanos of the oldest append not yet shipped (0: none)
	waiters        atomic.Int32
	background     bool // the tick loop runs (else synchronous appends ship themselves)
}

func newShipper(ctx context.Context, l *Log, sealed <-chan struct{}) (*shipper, error) {
	s := &shipper{
		l: l, b: l.bucket, shard: uint32(l.own.Index), store: l.store,
		tailOn:       !l.opts.DisableTailReplication,
		sealed:       sealed,
		kick:         make(chan struct{}, 1),
		cleanupKick:  make(chan struct{}, 1),
		durable:      map[uint64]bool{},
		pendingTails: map[string]*pendingTail{},
		shippedCh:    make(chan struct{}),
	}
	// The bucket must be checked before anything ships or the shard is
	// ready: a transient failure is retried, with backoff, for up to
	// StartupTimeout; a stale or diverged disk is refused at once.
	deadline := time.Now().Add(l.opts.StartupTimeout)
	backoff := 100 * time.Millisecond
	for {
		err := s.reconcile(ctx)
		if err == nil {
			return s, nil
		}
		if !transientStartup(err) || time.Now().Add(backoff).After(deadline) {
			return nil, err
		}
		l.log.Warn("the bucket could not be checked at start; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// transientStartup reports whether a start-up check failure may pass on
// retry (the bucket unreachable or failing), as opposed to a verdict about
// the data (stale, diverged, corrupt, a second writer, bad configuration).
func transientStartup(err error) bool {
	for _, permanent := range []error{ErrStaleDisk, ErrDiverged, ErrUsage, ErrSecondWriter,
		localseg.ErrCorrupt, localseg.ErrPoisoned, localseg.ErrInvalidState,
		blobtier.ErrCorrupt, blobtier.ErrConflict, blobtier.ErrUnsupported} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	return true
}

// reconcile is the start-up half of SPEC §7: it reads the bucket's
// watermark, segments, tail objects and cursor object, refuses a stale or
// diverged disk, learns which local segments are durable in the bucket,
// aligns the watermark with the local reclaim base, and rebuilds the tail
// cursor from the bucket (never from the local tip).
//
// Every check runs before anything is changed: a refused Open leaves the
// shard directory byte-identical and the bucket as it found it. Only once
// the verdict is in does it repair a damaged watermark, adopt the bucket's
// watermark locally (Reclaim) and commit a local reclaim base above it.
func (s *shipper) reconcile(ctx context.Context) error {
	s.durable = map[uint64]bool{}
	snap, err := s.store.Snapshot()
	if err != nil {
		return err
	}
	// One read of the shard's bucket state, each verdict reached as soon
	// as its part is in (a refused Open issues no request past it).
	var (
		base, baseSeg uint64 // the reclaim base the checks take
		lowRetained   uint64 // the lowest sequence a retained object above the base holds (0: none)
		newestTail    blobtier.ObjectInfo
		bucketTip     uint64
		tails         []blobtier.Key // tail objects above the base
	)
	lower := func(seq uint64) {
		if lowRetained == 0 || seq < lowRetained {
			lowRetained = seq
		}
	}
	check := func(v *bucketview.View, done bucketview.Parts) error {
		switch done {
		case bucketview.Watermark:
			if v.WatermarkDamaged {
				// A damaged watermark would stop GC and every restore. The
				// owner rewrites it, but only after the checks below
				// passed, and never below what the bucket's retained
				// objects imply (repairTarget).
				s.l.log.Error("the reclaim watermark is damaged; it is rewritten once the start-up checks pass", "err", v.WatermarkErr)
			}
			// The bucket's reclaim went further than the local store (a
			// pass crashed after committing the watermark, or another
			// owner reclaimed): the watermark's segment must end at the
			// watermark's sequence locally. It is adopted (Reclaim) only
			// after every check; until then the checks take the base it
			// names.
			base, baseSeg = snap.ReclaimedSeq, snap.ReclaimedSeg
			if v.Mark.Segment > snap.ReclaimedSeg {
				if err := adoptable(snap, v.Mark); err != nil {
					return err
				}
				base, baseSeg = v.Mark.Seq, v.Mark.Segment
			}
		case bucketview.Cursor:
			if v.CursorDamaged {
				// A damaged cursor object must not keep the owner down: the
				// owner rebuilds it from its own state once the checks
				// pass. Without its shipped_through, the bucket's tip comes
				// from the objects alone.
				s.l.log.Error("the cursor object is damaged; it is rebuilt once the start-up checks pass", "key", blobtier.CursorKey(s.shard), "err", v.CursorErr)
			}
			// The bucket's tip: tail objects and the cursor object's
			// shipped_through.
			for _, info := range v.TailObjects {
				bucketTip = max(bucketTip, info.Parsed.LastSeq)
				if info.Parsed.LastSeq > base {
					lower(info.Parsed.FirstSeq)
					tails = append(tails, info.Parsed)
				}
				if info.Parsed.LastSeq > base && info.Parsed.LastSeq <= snap.Tip &&
					info.Parsed.LastSeq > newestTail.Parsed.LastSeq {
					newestTail = info
				}
			}
			bucketTip = max(bucketTip, v.Cur.ShippedThrough)
			if bucketTip > snap.Tip {
				return fmt.Errorf("%w: the bucket holds sequences through %d, the local store through %d", ErrStaleDisk, bucketTip, snap.Tip)
			}
		}
		return nil
	}
	view, err := bucketview.Read(ctx, s.b, s.shard, bucketview.Options{
		Parts: bucketview.All,
		// Tail objects before the cursor object, both before the segments:
		// the stale-disk verdict needs no segment listing.
		Order:                []bucketview.Parts{bucketview.Watermark, bucketview.Tails, bucketview.Cursor, bucketview.Segments},
		KeepDamagedWatermark: s.b.CanCAS() && (snap.Tip > 0 || snap.ReclaimedSeg > 0),
		KeepDamagedCursor:    true,
		Check:                check,
	})
	if err != nil {
		return err
	}
	wm, wmDamaged, cur, curDamaged := view.Mark, view.WatermarkDamaged, view.Cur, view.CursorDamaged

	local := map[uint64]localseg.SegmentInfo{}
	var highest uint64
	for _, seg := range snap.Segments {
		local[seg.ID] = seg
		highest = max(highest, seg.ID)
	}
	var bucketSegs []blobtier.ObjectInfo
	var damagedSegs []string
	for _, info := range view.SegmentObjects {
		if info.Parsed.Segment > wm.Segment {
			bucketSegs = append(bucketSegs, info)
		}
	}
	for _, info := range bucketSegs {
		id := info.Parsed.Segment
		seg, ok := local[id]
		switch {
		case id <= baseSeg:
			// Reclaimed locally; the object is an orphan the next GC removes.
			continue
		case id > highest || (ok && !seg.Sealed):
			return fmt.Errorf("%w: the bucket holds segment %d (%s) and the local store's active segment is %d", ErrStaleDisk, id, info.Key, highest)
		case !ok:
			return fmt.Errorf("%w: the bucket holds segment %d (%s) that the local store lacks", ErrDiverged, id, info.Key)
		}
		match, damaged, err := s.matches(ctx, info, seg, !verifiedBefore(seg, cur.ShippedThrough, tails))
		if err != nil {
			return err
		}
		lower(seg.FirstSeq)
		if damaged {
			// Our own upload, damaged in the bucket: not durable. It is
			// deleted after the verdict and uploaded again.
			damagedSegs = append(damagedSegs, info.Key)
			continue
		}
		if !match {
			return fmt.Errorf("%w: segment %d differs from the bucket's object %s", ErrDiverged, id, info.Key)
		}
		s.durable[id] = true
	}

	if newestTail.Key != "" {
		if err := s.compareTail(ctx, newestTail, base, snap.Segments); err != nil {
			return err
		}
	}

	// The verdict is in: from here on the shard directory and the bucket
	// may change.
	for _, key := range damagedSegs {
		// The uploader's first pass puts it again (and, should this delete
		// fail, finds it damaged on its own read-back and deletes it then).
		s.l.log.Error("a segment of this shard reads back damaged from the bucket; deleting it to upload again", "key", key)
		if err := s.b.Delete(ctx, key); err != nil {
			s.l.log.Warn("deleting the damaged segment failed; the uploader retries", "key", key, "err", err)
		}
	}
	if wmDamaged {
		if lowRetained == 0 {
			// Nothing retained above the local base: the bucket held
			// through the cursor object's shipped_through, and reclaimed it.
			lowRetained = cur.ShippedThrough + 1
		}
		seq, seg := repairTarget(snap, lowRetained)
		s.l.log.Error("the reclaim watermark is damaged; rewriting it", "seq", seq, "segment", seg,
			"local_reclaimed_seq", snap.ReclaimedSeq, "lowest_retained_seq", lowRetained)
		if wm, err = watermark.Repair(ctx, s.b, s.shard, seq, seg); err != nil {
			return fmt.Errorf("repair the reclaim watermark: %w", err)
		}
		if wm.Segment > snap.ReclaimedSeg {
			if err := adoptable(snap, wm); err != nil {
				return err
			}
		}
	}
	if wm.Segment > snap.ReclaimedSeg {
		res, err := s.store.Reclaim(wm.Segment)
		if err != nil {
			return fmt.Errorf("adopt the bucket's watermark (segment %d, sequence %d): %w", wm.Segment, wm.Seq, err)
		}
		if res.ThroughSeq != wm.Seq {
			return fmt.Errorf("%w: the bucket's watermark ends segment %d at sequence %d, the local store at %d", ErrDiverged, wm.Segment, wm.Seq, res.ThroughSeq)
		}
		if snap, err = s.store.Snapshot(); err != nil {
			return err
		}
	}

	// A store reclaimed locally beyond the bucket's watermark commits the
	// watermark before anything above it is uploaded, so a restore never
	// looks for reclaimed events.
	if snap.ReclaimedSeg > wm.Segment {
		if !s.b.CanCAS() {
			return usagef("the local store was reclaimed through segment %d, and this bucket cannot hold a reclaim watermark safely (no compare-and-swap)", snap.ReclaimedSeg)
		}
		if wm, err = watermark.Advance(ctx, s.b, s.shard, snap.ReclaimedSeq, snap.ReclaimedSeg); err != nil {
			return fmt.Errorf("commit the local reclaim base as the watermark: %w", err)
		}
	}
	s.wm = wm

	var ranges []tailbatch.SegRange
	for _, seg := range snap.Segments {
		if s.durable[seg.ID] {
			ranges = append(ranges, tailbatch.SegRange{FirstSeq: seg.FirstSeq, LastSeq: seg.LastSeq})
		}
	}
	tv, err := bucketview.Read(ctx, s.b, s.shard, bucketview.Options{Parts: bucketview.Tails})
	if err != nil {
		return err
	}
	shipped := tailbatch.CursorFrom(s.shard, snap.ReclaimedSeq, ranges, tv.TailObjects)
	s.repl = tailbatch.New(s.shard, shipped, tailbatch.Options{Disabled: !s.tailOn})
	if curDamaged {
		c, err := s.repl.SyncCursor(ctx, s.b, snap.Consumers)
		if err != nil {
			return fmt.Errorf("rebuild the damaged cursor object: %w", err)
		}
		s.l.log.Error("the cursor object was damaged; rebuilt from the owner's state", "key", blobtier.CursorKey(s.shard),
			"shipped_through", c.ShippedThrough, "consumers", len(c.Consumers))
		s.mu.Lock()
		s.lastConsumers = snap.Consumers
		s.mu.Unlock()
	}
	s.l.openRep.BucketTip = bucketTip
	s.l.openRep.ShippedThrough = shipped
	s.l.openRep.DurableSegments = len(s.durable)
	s.l.openRep.Watermark = wm.Seq
	if shipped < snap.Tip {
		s.unshippedSince.Store(s.l.opts.Now().UnixNano())
	}
	return nil
}

// verifiedBefore reports whether a running uploader read segment seg's
// object back intact before, so Open need not download it again: the
// cursor object's shipped_through (shipped) reaches past it, and no tail
// object overlapping it is left (tails are the ones above the base). The
// shipped position moves over a segment only by a tail object, which tail
// cleanup deletes only once a segment read back intact covers it, or by
// the segment itself once it was read back intact; so a segment whose
// read-back never succeeded is either above shipped or still overlapped by
// its tail objects, and is read back at start.
func verifiedBefore(seg localseg.SegmentInfo, shipped uint64, tails []blobtier.Key) bool {
	if seg.LastSeq > shipped {
		return false
	}
	for _, k := range tails {
		if k.FirstSeq <= seg.LastSeq && k.LastSeq >= seg.FirstSeq {
			return false
		}
	}
	return true
}

// adoptable checks, without changing anything, that the local store can
// adopt the bucket's watermark wm (above its own reclaim base): segment
// wm.Segment is a sealed local segment whose last event is wm.Seq.
func adoptable(snap localseg.Snapshot, wm watermark.Mark) error {
	if wm.Seq > snap.Tip {
		return fmt.Errorf("%w: the bucket's watermark reclaimed through sequence %d (segment %d), the local store holds through %d", ErrStaleDisk, wm.Seq, wm.Segment, snap.Tip)
	}
	for i, seg := range snap.Segments {
		if seg.ID != wm.Segment {
			continue
		}
		if i == len(snap.Segments)-1 || !seg.Sealed {
			return fmt.Errorf("%w: the bucket's watermark reclaimed through segment %d, the local store's active segment", ErrDiverged, wm.Segment)
		}
		if seg.LastSeq != wm.Seq {
			return fmt.Errorf("%w: the bucket's watermark ends segment %d at sequence %d, the local store at %d", ErrDiverged, wm.Segment, wm.Seq, seg.LastSeq)
		}
		return nil
	}
	return fmt.Errorf("%w: the bucket's watermark reclaimed through segment %d (sequence %d), a segment the local store does not hold", ErrDiverged, wm.Segment, wm.Seq)
}

// repairTarget is the mark a damaged watermark is rewritten with: the
// local reclaim base, raised to the last local sealed segment that ends
// below lowRetained (the lowest sequence the bucket still holds above the
// base, or one past the cursor object's shipped_through when it holds
// nothing). Every sequence below lowRetained is gone from the bucket, so
// the real watermark was at least there: a stale disk's lower base never
// moves the mark backward.
func repairTarget(snap localseg.Snapshot, lowRetained uint64) (seq, segment uint64) {
	seq, segment = snap.ReclaimedSeq, snap.ReclaimedSeg
	for _, seg := range snap.Segments {
		if !seg.Sealed || seg.LastSeq >= lowRetained {
			break
		}
		seq, segment = seg.LastSeq, seg.ID
	}
	return seq, segment
}

// matches reports whether the bucket's object holds exactly the local
// sealed segment's bytes, read back and verified: never the mere presence
// of the key, nor its metadata alone (a put may have landed damaged bytes
// under the right metadata, and a failed read-back left it behind). Without
// readBack (the object was read back intact before: verifiedBefore) the
// metadata must still name the local bytes. damaged reports an object of our own (its metadata names the local bytes)
// whose bytes fail verification: it is not durable, and reconcile deletes
// it so the uploader puts it again.
func (s *shipper) matches(ctx context.Context, info blobtier.ObjectInfo, seg localseg.SegmentInfo, readBack bool) (match, damaged bool, err error) {
	st, err := s.b.Stat(ctx, info.Key)
	if errors.Is(err, blobtier.ErrCorrupt) {
		// No valid metadata: not an object this shard's writer made.
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("stat %s: %w", info.Key, err)
	}
	data, err := s.store.ReadSegment(seg.ID)
	if err != nil {
		return false, false, err
	}
	if st.Meta.Length != int64(len(data)) || st.Meta.XXH64 != blobtier.Digest(data) {
		return false, false, nil
	}
	if !readBack {
		return true, false, nil
	}
	got, _, err := s.b.Get(ctx, info.Key)
	if errors.Is(err, blobtier.ErrCorrupt) {
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("read back %s: %w", info.Key, err)
	}
	return bytes.Equal(got, data), false, nil
}

// compareTail checks that the newest tail object the local store also
// covers holds the same events as the local log (above base, which the
// watermark reclaims). It reads the local segments that hold the object's
// events — a tail object lies within one segment — and never the store's
// read index, so Open stays O(1) in the log's length.
func (s *shipper) compareTail(ctx context.Context, info blobtier.ObjectInfo, base uint64, segs []localseg.SegmentInfo) error {
	data, _, err := s.b.Get(ctx, info.Key)
	if err != nil {
		return fmt.Errorf("read %s: %w", info.Key, err)
	}
	var (
		loaded localseg.SegmentInfo // the segment whose events are in local
		local  map[uint64]localseg.Frame
	)
	for f, err := range localseg.Frames(data) {
		if err != nil {
			return fmt.Errorf("%w: tail object %s: %v", ErrDiverged, info.Key, err)
		}
		if f.Kind != localseg.KindEvent || f.Seq <= base {
			continue
		}
		if local == nil || f.Seq < loaded.FirstSeq || f.Seq > loaded.LastSeq {
			seg, ok := segmentHolding(segs, f.Seq)
			if !ok {
				return fmt.Errorf("%w: sequence %d of tail object %s is not in the local store", ErrDiverged, f.Seq, info.Key)
			}
			if local, err = s.segmentEvents(seg, info.Parsed.FirstSeq, info.Parsed.LastSeq); err != nil {
				return err
			}
			loaded = seg
		}
		rec, ok := local[f.Seq]
		if !ok {
			return fmt.Errorf("%w: sequence %d of tail object %s is not in local segment %d", ErrDiverged, f.Seq, info.Key, loaded.ID)
		}
		if rec.ExecutionID != f.ExecutionID || rec.TransactionID != f.TransactionID || rec.Payload != f.Payload {
			return fmt.Errorf("%w: sequence %d differs between the local store and tail object %s", ErrDiverged, f.Seq, info.Key)
		}
	}
	return nil
}

// segmentHolding returns the local segment whose events include seq.
func segmentHolding(segs []localseg.SegmentInfo, seq uint64) (localseg.SegmentInfo, bool) {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].LastSeq >= seq })
	if i == len(segs) || segs[i].Events == 0 || segs[i].FirstSeq > seq {
		return localseg.SegmentInfo{}, false
	}
	return segs[i], true
}

// segmentEvents reads the durable bytes of a local segment and returns its
// event frames from first through last.
func (s *shipper) segmentEvents(seg localseg.SegmentInfo, first, last uint64) (map[uint64]localseg.Frame, error) {
	data, err := s.store.ReadRange(seg.ID, 0, seg.Size)
	if err != nil {
		return nil, fmt.Errorf("read local segment %d: %w", seg.ID, err)
	}
	out := map[uint64]localseg.Frame{}
	for f, err := range localseg.Frames(data) {
		if err != nil {
			var ce *localseg.CorruptionError
			if errors.As(err, &ce) {
				ce.Segment = seg.ID
			}
			return nil, fmt.Errorf("local segment %d: %w", seg.ID, err)
		}
		if f.Kind == localseg.KindEvent && f.Seq >= first && f.Seq <= last {
			out[f.Seq] = f
		}
	}
	return out, nil
}

func (s *shipper) start(ctx context.Context, wg *sync.WaitGroup) {
	s.background = true
	wg.Add(2)
	go func() { defer wg.Done(); s.tickLoop(ctx) }()
	go func() { defer wg.Done(); s.maintLoop(ctx) }()
}

// tickLoop seals by age and ships the tail on every tick, and at once when
// a synchronous append is waiting.
func (s *shipper) tickLoop(ctx context.Context) {
	t := time.NewTicker(s.l.opts.TailInterval)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := 20 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		case <-retry.C:
		}
		if _, err := s.store.SealIfDue(); err != nil {
			s.l.noteErr(err)
			s.l.log.Error("seal by age failed", "err", err)
		}
		err := s.shipTail(ctx)
		s.updateGauges()
		if err != nil && s.waiters.Load() > 0 && ctx.Err() == nil {
			// Synchronous appends are waiting: retry soon, with backoff.
			retry.Reset(backoff + rand.N(backoff))
			backoff = min(2*backoff, time.Second)
		} else if err == nil {
			backoff = 20 * time.Millisecond
		}
	}
}

// maintLoop uploads sealed segments (on every seal, and retrying failures
// with backoff), then runs tail cleanup and the periodic GC.
func (s *shipper) maintLoop(ctx context.Context) {
	retry := time.NewTimer(0) // a first pass finds segments sealed before a restart
	defer retry.Stop()
	var gcTick <-chan time.Time
	if g := s.l.opts.GC; g.Enabled && g.Interval > 0 {
		t := time.NewTicker(g.Interval)
		defer t.Stop()
		gcTick = t.C
	}
	for {
		runGC := false
		select {
		case <-ctx.Done():
			return
		case <-s.sealed:
		case <-s.cleanupKick:
		case <-retry.C:
		case <-gcTick:
			runGC = true
		}
		err := s.maintain(ctx, runGC)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if err != nil {
			s.uploadBackoff = min(max(2*s.uploadBackoff, 100*time.Millisecond), DefaultUploadRetryMax)
			d := s.uploadBackoff
			s.mu.Unlock()
			retry.Reset(d/2 + rand.N(d/2+1))
			continue
		}
		s.uploadBackoff = 0
		dirty := s.cleanupDirty
		s.mu.Unlock()
		if dirty {
			retry.Reset(s.l.opts.TailInterval)
		}
	}
}

// maintain is one maintenance pass: uploads, cleanup, and GC when asked.
func (s *shipper) maintain(ctx context.Context, runGC bool) error {
	s.maint.Lock()
	defer s.maint.Unlock()
	if err := s.stopped(); err != nil {
		return nil // stopped for good: nothing to retry
	}
	_, err := s.uploadSealed(ctx)
	if err == nil && !s.l.opts.DisableTailCleanup {
		err = s.cleanupLocked(ctx)
	}
	if runGC {
		if _, gerr := s.l.gcLocked(ctx, s.l.policy(), false, false); gerr != nil {
			s.l.log.Error("periodic GC failed", "err", gerr)
		}
	}
	return err
}

func (s *shipper) stopped() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopErr
}

// secondWriter stops shipping, GC and cleanup for the shard for good.
func (s *shipper) secondWriter(key string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopErr == nil {
		s.stopErr = fmt.Errorf("%w: a different object exists under %s; shipping, GC and tail cleanup stopped for shard %d", ErrSecondWriter, key, s.shard)
		s.l.m.SecondWriterDetected.Inc()
		s.l.log.Error("second writer detected: shipping, GC and tail cleanup stopped", "key", key, "err", err)
	}
	return s.stopErr
}

// noteUpload and noteTail record the latest outcome of each shipping path;
// readiness needs both to succeed. Cleanup and GC failures leave objects
// behind, not events unshipped, and do not touch readiness.
func (s *shipper) noteUpload(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uploadErr = err
}

func (s *shipper) noteTail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tailErr = err
}

// health is nil while the shard ships.
func (s *shipper) health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopErr != nil:
		return s.stopErr
	case s.uploadErr != nil:
		return fmt.Errorf("bucket failing, retrying segment uploads: %v", s.uploadErr)
	case s.tailErr != nil:
		return fmt.Errorf("bucket failing, retrying tail shipment: %v", s.tailErr)
	}
	return nil
}

func (s *shipper) isDurable(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable[id]
}

// UploadReport counts one upload pass.
type UploadReport struct {
	Uploaded int   `json:"segments_uploaded"`
	Bytes    int64 `json:"bytes_uploaded"`
	Pending  int   `json:"segments_pending"`
}

// uploadSealed uploads the sealed segments the bucket lacks, in id order,
// each checked frame by frame first (the bucket must never receive local
// bit-rot under a fresh, valid digest). It stops at the first failure so
// ids stay in order.
func (s *shipper) uploadSealed(ctx context.Context) (UploadReport, error) {
	var rep UploadReport
	snap, err := s.store.Snapshot()
	if err != nil {
		return rep, err
	}
	var todo []localseg.SegmentInfo
	for _, seg := range snap.Segments {
		if seg.Sealed && seg.ID > snap.ReclaimedSeg && !s.isDurable(seg.ID) {
			todo = append(todo, seg)
		}
	}
	rep.Pending = len(todo)
	for _, seg := range todo {
		if err := s.stopped(); err != nil {
			return rep, err
		}
		data, err := s.store.ReadSegment(seg.ID)
		if err != nil {
			return rep, err
		}
		first := seg.FirstSeq
		if seg.Events == 0 {
			first = 0
		}
		if _, err := localseg.VerifySegment(seg.ID, data, first); err != nil {
			err = fmt.Errorf("segment %d fails verification before upload; not uploaded: %w", seg.ID, err)
			s.l.log.Error("refusing to upload a corrupt segment", "segment", seg.ID, "err", err)
			s.noteUpload(err)
			return rep, err
		}
		key := blobtier.SegmentKey(s.shard, seg.ID)
		err = s.b.PutIfAbsent(ctx, key, data, 0)
		if errors.Is(err, blobtier.ErrConflict) {
			return rep, s.secondWriter(key, err)
		}
		if err != nil {
			s.noteUpload(err)
			return rep, fmt.Errorf("upload segment %d: %w", seg.ID, err)
		}
		// Durable only once the bucket is seen to hold exactly these bytes:
		// the put's success alone does not prove it (a write corrupted on
		// the way, or a server that ignored the checksum).
		if _, _, err := s.b.Get(ctx, key); err != nil {
			if errors.Is(err, blobtier.ErrCorrupt) {
				// Our own object (its metadata is ours) holds other bytes:
				// remove it so the next pass uploads it again.
				s.l.log.Error("uploaded segment reads back damaged; deleting it to upload again", "key", key, "err", err)
				if derr := s.b.Delete(ctx, key); derr != nil {
					err = errors.Join(err, derr)
				}
			}
			s.noteUpload(err)
			return rep, fmt.Errorf("verify uploaded segment %d: %w", seg.ID, err)
		}
		s.noteUpload(nil)
		s.mu.Lock()
		s.durable[seg.ID] = true
		s.mu.Unlock()
		// Move the shipped position now, not after the loop: a later
		// segment may fail, and GC may then reclaim these, which the tail
		// must not be left below.
		if seq, _ := s.contiguous(); seq > 0 {
			s.advance(seq)
		}
		s.l.m.SegmentsUploaded.Inc()
		rep.Uploaded++
		rep.Pending--
		rep.Bytes += int64(len(data))
	}
	// Durable segments cover their events: the tail need not ship them.
	if seq, _ := s.contiguous(); seq > 0 {
		s.advance(seq)
	}
	return rep, nil
}

// contiguous is the contiguous durable watermark of the shard: the reclaim
// base extended over sealed segments while each is durable.
func (s *shipper) contiguous() (seq, seg uint64) {
	snap, err := s.store.Snapshot()
	if err != nil {
		return 0, 0
	}
	seq, seg = watermark.Contiguous(snap.Segments, s.isDurable)
	if seq < snap.ReclaimedSeq {
		seq, seg = snap.ReclaimedSeq, snap.ReclaimedSeg
	}
	return seq, seg
}

// advance moves the shipped position and wakes synchronous appenders.
func (s *shipper) advance(seq uint64) {
	before := s.repl.ShippedThrough()
	s.repl.Advance(seq)
	if s.repl.ShippedThrough() > before {
		s.notifyShipped()
	}
}

func (s *shipper) notifyShipped() {
	s.mu.Lock()
	close(s.shippedCh)
	s.shippedCh = make(chan struct{})
	s.mu.Unlock()
	if s.repl.ShippedThrough() >= s.store.Tip() {
		s.unshippedSince.Store(0)
	}
}

type pendingTail struct {
	last   uint64
	misses int
}

// maxCleanupMisses bounds how often a cleanup looks again for a superseded
// tail object it did not see (a GC pass may have deleted it meanwhile).
const maxCleanupMisses = 3

// cleanupLocked deletes tail objects a durable segment covers. It runs only
// when the contiguous durable watermark moved, the last pass left work, or
// a tail object this process committed is superseded and not yet deleted,
// so an idle shard issues no request.
func (s *shipper) cleanupLocked(ctx context.Context) error {
	seq, _ := s.contiguous()
	s.mu.Lock()
	due := seq > s.cleanedThrough || s.cleanupDirty
	for _, p := range s.pendingTails {
		due = due || p.last <= seq
	}
	s.mu.Unlock()
	if !due {
		return nil
	}
	res, err := reclaim.CleanupTail(ctx, s.b, s.shard, seq)
	m := s.l.m
	m.TailObjectsReclaimed.Add(float64(res.Reclaimed))
	m.TailReclaimBytes.Add(float64(res.Bytes))
	m.TailReclaimFailed.Add(float64(res.Failed))
	m.TailObjectsRetained.Set(float64(res.Retained))
	m.TailObjectsUnparsed.Set(float64(res.Unparsed))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || res.Failed > 0 {
		// Cleanup failing leaves objects behind, not events unshipped: it
		// is logged and retried, and does not make the shard unready.
		s.cleanupDirty = true
		if err == nil {
			err = fmt.Errorf("tail cleanup: %d deletes failed: %v", res.Failed, res.Errors)
		}
		s.l.log.Warn("tail cleanup incomplete; retrying later", "err", err)
		return err
	}
	for _, k := range res.Deleted {
		delete(s.pendingTails, k)
	}
	s.cleanupDirty = false
	for k, p := range s.pendingTails {
		if p.last > seq {
			continue
		}
		if p.misses++; p.misses >= maxCleanupMisses {
			delete(s.pendingTails, k)
			continue
		}
		s.cleanupDirty = true
	}
	s.cleanedThrough = seq
	return nil
}

// shipTail ships the durable tail (Prepare under the store's brief lock →
// Upload with no lock → Commit), then the cursor object when the shipped
// position or a consumer moved.
func (s *shipper) shipTail(ctx context.Context) error {
	if err := s.stopped(); err != nil {
		return err
	}
	before := s.repl.ShippedThrough()
	var failure error
	var committedMax uint64
	if s.tailOn {
		batches, err := s.repl.Prepare(s.store)
		if errors.Is(err, tailbatch.ErrBadExtent) {
			// The shipped position may sit below the reclaim base: GC
			// reclaims only segments durable in the bucket, so everything
			// through the contiguous durable watermark is there. Move up to
			// it and prepare again, rather than fail every pass.
			if seq, _ := s.contiguous(); seq > s.repl.ShippedThrough() {
				s.repl.Advance(seq)
				batches, err = s.repl.Prepare(s.store)
			}
		}
		if err != nil {
			failure = err
		}
		for _, bt := range batches {
			if err := tailbatch.Upload(ctx, s.b, s.store, bt); err != nil {
				s.repl.Fail(bt, err)
				s.l.m.TailReplicationFailed.Inc()
				if errors.Is(err, blobtier.ErrConflict) {
					return s.secondWriter(bt.Key, err)
				}
				failure = err
				break
			}
			if err := s.repl.Commit(bt); err != nil {
				failure = err
				break
			}
			s.mu.Lock()
			s.pendingTails[bt.Key] = &pendingTail{last: bt.LastSeq}
			s.mu.Unlock()
			committedMax = bt.LastSeq
			s.l.m.TailBatches.Inc()
			s.l.m.TailRecords.Add(float64(bt.Records()))
			s.l.m.TailBytes.Add(float64(bt.Len()))
		}
	}
	if s.repl.ShippedThrough() > before {
		s.notifyShipped()
	}
	if committedMax > 0 {
		// A tail object whose events a durable segment already covers (its
		// put raced the upload) is superseded on arrival: ask for a cleanup,
		// or it would wait for the next segment to become durable.
		if seq, _ := s.contiguous(); committedMax <= seq {
			select {
			case s.cleanupKick <- struct{}{}:
			default:
			}
		}
	}
	if failure == nil {
		failure = s.syncCursor(ctx)
	}
	s.noteTail(failure)
	return failure
}

// syncCursor writes the cursor object when the shipped position or the
// consumers changed since the last write.
func (s *shipper) syncCursor(ctx context.Context) error {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	// The shipped position is read before the consumers snapshot, so the
	// snapshot is never older than the frames the object vouches for.
	through := s.repl.ShippedThrough()
	snap, err := s.store.Snapshot()
	if err != nil {
		return err
	}
	s.mu.Lock()
	changed := !maps.Equal(s.lastConsumers, snap.Consumers)
	s.mu.Unlock()
	if !s.repl.CursorDue() && !changed {
		return nil
	}
	c, err := s.repl.SyncCursorThrough(ctx, s.b, through, snap.Consumers)
	if err != nil {
		return fmt.Errorf("write the cursor object: %w", err)
	}
	if c.Repaired {
		s.l.log.Error("the cursor object was damaged; rewritten with the owner's state", "key", blobtier.CursorKey(s.shard), "shipped_through", c.ShippedThrough)
	}
	s.mu.Lock()
	s.lastConsumers = snap.Consumers
	s.mu.Unlock()
	return nil
}

func (s *shipper) noteAppended() {
	s.unshippedSince.CompareAndSwap(0, s.l.opts.Now().UnixNano())
}

// waitShipped blocks a synchronous append until the bucket holds seq, or
// returns ErrNotInBucket after SyncWait (the event stays durable locally and
// ships later).
func (s *shipper) waitShipped(ctx context.Context, seq uint64) error {
	if !s.tailOn {
		return fmt.Errorf("%w: synchronous mode needs tail replication", ErrUsage)
	}
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	timer := time.NewTimer(s.l.opts.SyncWait)
	defer timer.Stop()
	if !s.background {
		return s.shipUntil(ctx, seq, timer.C)
	}
	for {
		s.mu.Lock()
		ch, stop, closing := s.shippedCh, s.stopErr, s.closing
		s.mu.Unlock()
		if s.repl.ShippedThrough() >= seq {
			return nil
		}
		if stop != nil {
			return fmt.Errorf("%w (sequence %d): %v", ErrNotInBucket, seq, stop)
		}
		if closing {
			return errClosedWaiting(seq)
		}
		select {
		case s.kick <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("%w: sequence %d was not confirmed within %s", ErrNotInBucket, seq, s.l.opts.SyncWait)
		case <-ctx.Done():
			return fmt.Errorf("%w: sequence %d: %v", ErrNotInBucket, seq, ctx.Err())
		}
	}
}

// shipUntil ships the tail itself, retrying with backoff, until the bucket
// holds seq or the wait ends: a synchronous append on a log opened without
// background work (one-shot commands).
func (s *shipper) shipUntil(ctx context.Context, seq uint64, deadline <-chan time.Time) error {
	backoff := 20 * time.Millisecond
	for {
		s.mu.Lock()
		ch, closing := s.shippedCh, s.closing
		s.mu.Unlock()
		if closing {
			return errClosedWaiting(seq)
		}
		err := s.shipTail(ctx)
		if s.repl.ShippedThrough() >= seq {
			return nil
		}
		if stop := s.stopped(); stop != nil {
			return fmt.Errorf("%w (sequence %d): %v", ErrNotInBucket, seq, stop)
		}
		select {
		case <-ch: // shipped moved, or Close released the waiters
		case <-deadline:
			return fmt.Errorf("%w: sequence %d was not confirmed within %s: %v", ErrNotInBucket, seq, s.l.opts.SyncWait, err)
		case <-ctx.Done():
			return fmt.Errorf("%w: sequence %d: %v", ErrNotInBucket, seq, ctx.Err())
		case <-time.After(backoff + rand.N(backoff)):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// stopWaiters releases every synchronous appender at Close, after its last
// shipment: each returns at once (ErrNotInBucket unless the bucket already
// holds its event), and one that starts waiting later does not wait.
func (s *shipper) stopWaiters() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.notifyShipped()
}

func errClosedWaiting(seq uint64) error {
	return fmt.Errorf("%w: sequence %d: the log was closed before the bucket confirmed it", ErrNotInBucket, seq)
}

// final is Close's last shipment: sealed segments, the tail and the cursor
// object, bounded by ctx.
func (s *shipper) final(ctx context.Context) error {
	if s.stopped() != nil {
		return nil
	}
	s.maint.Lock()
	_, uerr := s.uploadSealed(ctx)
	s.maint.Unlock()
	terr := s.shipTail(ctx)
	return errors.Join(uerr, terr)
}

func (s *shipper) updateGauges() {
	m := s.l.m
	snap, err := s.store.Snapshot()
	if err != nil {
		return
	}
	now := s.l.opts.Now()
	if n := len(snap.Segments); n > 0 && snap.Segments[n-1].Size > 0 && !snap.ActiveOpenedAt.IsZero() {
		m.OldestUnsealedAge.Set(now.Sub(snap.ActiveOpenedAt).Seconds())
	} else {
		m.OldestUnsealedAge.Set(0)
	}
	if since := s.unshippedSince.Load(); since > 0 && s.repl.ShippedThrough() < snap.Tip {
		m.OldestUnreplicatedAge.Set(now.Sub(time.Unix(0, since)).Seconds())
	} else {
		m.OldestUnreplicatedAge.Set(0)
	}
	m.UnshippedBytes.Set(float64(s.repl.Stats().PendingBytes))
}
