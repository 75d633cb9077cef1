package coldload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// Hydrate rebuilds shard's local store in dir from the bucket alone (docs/FORMAT.md
// §9): it refuses a dir that is not empty (or is named for another shard),
// builds the store in a sibling temporary directory, and renames it into
// place only when it is complete. See the package documentation for the
// order of the steps and what is verified where.
func Hydrate(ctx context.Context, b Reader, shard uint32, dir string, opts Options) (Report, error) {
	opts = opts.withDefaults()
	start := opts.Now()
	rep := Report{Shard: shard, Dir: dir}
	if dir == "" {
		return rep, errors.New("coldload: no target directory")
	}
	dir = filepath.Clean(dir)
	if n, ok := localseg.ShardOfDir(filepath.Base(dir)); ok && n != uint64(shard) {
		return rep, fmt.Errorf("%w: %s is named for shard %d, not %d", ErrWrongShard, dir, n, shard)
	}
	fsys := opts.Store.FS
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	// Directories created here become durable only when their own parents
	// are synced: remember them, top-down, for the end.
	var created []string
	for d := parent; ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); !errors.Is(err, fs.ErrNotExist) || filepath.Dir(d) == d {
			break
		}
		created = append([]string{d}, created...)
	}
	if err := fsys.MkdirAll(parent, 0o755); err != nil {
		return rep, fmt.Errorf("coldload: create %s: %w", parent, err)
	}
	// A second restore of the same directory fails at once on the lock, so
	// the emptiness check below and the leftover cleanup cannot race.
	lock, err := fsys.Lock(filepath.Join(parent, "."+base+".hydrate.lock"))
	if err != nil {
		return rep, fmt.Errorf("coldload: restore of %s: %w", dir, err)
	}
	defer lock.Close()
	existed, err := checkEmpty(fsys, dir)
	if errors.Is(err, ErrNotEmpty) {
		existed, err = adoptUnstarted(fsys, dir, err)
	}
	if err != nil {
		return rep, err
	}

	tmp := filepath.Join(parent, "."+base+".hydrating")
	fullBecause := ""
	for attempt := 1; ; attempt++ {
		// A leftover is a restore that crashed or failed: its contents are
		// never trusted, only removed.
		if err := localseg.RemoveTree(fsys, tmp); err != nil {
			return rep, fmt.Errorf("coldload: remove leftover %s: %w", tmp, err)
		}
		if err := fsys.MkdirAll(tmp, 0o755); err != nil {
			return rep, fmt.Errorf("coldload: create %s: %w", tmp, err)
		}
		var p *plan
		rep, p, err = hydrateInto(ctx, b, shard, tmp, opts)
		rep.Dir, rep.Attempts = dir, attempt
		rep.Seconds = opts.Now().Sub(start).Seconds()
		if err == nil {
			break
		}
		if why, ok := asFull(err); ok && opts.Lazy {
			opts.Logger.Info("coldload: a lazy hydrate is not possible here; downloading everything", "shard", shard, "reason", why)
			opts.Lazy, fullBecause = false, why
			continue
		}
		if attempt < opts.MaxAttempts && p != nil && retriable(err) && ctx.Err() == nil {
			if q, qerr := makePlan(ctx, b, shard); qerr == nil && !p.same(q) {
				opts.Logger.Info("coldload: the bucket changed during the restore; starting over",
					"shard", shard, "attempt", attempt, "err", err)
				continue
			}
		}
		if rerr := localseg.RemoveTree(fsys, tmp); rerr != nil {
			opts.Logger.Warn("coldload: cannot remove the unfinished restore", "dir", tmp, "err", rerr)
		}
		return rep, err
	}

	// Publish: the complete store takes the target's name in one rename.
	if existed {
		if err := fsys.Remove(dir); err != nil {
			return rep, fmt.Errorf("coldload: replace empty %s: %w", dir, err)
		}
	}
	if err := fsys.Rename(tmp, dir); err != nil {
		return rep, fmt.Errorf("coldload: rename %s to %s: %w", tmp, dir, err)
	}
	if err := fsys.SyncDir(parent); err != nil {
		return rep, fmt.Errorf("coldload: sync %s: %w", parent, err)
	}
	for _, d := range created {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return rep, fmt.Errorf("coldload: sync %s: %w", filepath.Dir(d), err)
		}
	}
	rep.Seconds = opts.Now().Sub(start).Seconds()
	if fullBecause != "" {
		rep.Lazy = &LazyReport{Budget: opts.LocalBytes, FullBecause: fullBecause}
	}
	return rep, nil
}

// retriable reports errors that a live owner can cause by changing the
// bucket during the read: an object listed and then deleted, a hole where
// a reclaim or a seal moved things, a shortfall after a cleanup, a
// watermark committed and its objects deleted before the cursor object
// caught up.
func retriable(err error) bool {
	return errors.Is(err, blobtier.ErrNotFound) || errors.Is(err, ErrGap) || errors.Is(err, ErrShort) ||
		errors.Is(err, ErrWatermarkAhead)
}

// hydrateInto runs one attempt into the empty directory tmp.
func hydrateInto(ctx context.Context, b Reader, shard uint32, tmp string, opts Options) (rep Report, p *plan, err error) {
	rep = Report{Shard: shard}
	p, err = makePlan(ctx, b, shard)
	if err != nil {
		return rep, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &run{r: b, p: p, fsys: opts.Store.FS, dir: tmp, conc: opts.Concurrency,
		prog: &progress{fn: opts.Progress}, seen: make([]atomic.Bool, len(p.tails)), cancel: cancel, zomb: newZombies(p)}
	if p.hasCursor {
		h.cons = newConsumerTracker(p.cursor.ShippedThrough)
	}
	defer h.account(&rep) // objects and bytes read, zombies skipped
	if p.hasMark {
		rep.Objects++
	}
	if p.hasCursor || p.cursorErr != nil {
		rep.Objects++
	}
	rep.Base, rep.BaseSegment = p.mark.Seq, p.mark.Segment
	rep.OrphanSegments, rep.TailBelowWatermark = p.orphanSegs, p.orphanTails
	rep.Unparsed, rep.Lineage, rep.Listing = p.unparsed, ReportLineage(p.lin), p.view
	rep.ShippedThrough = p.cursor.ShippedThrough
	rep.NextSegment = p.nextSegment()
	if p.cursorErr != nil {
		rep.CursorDamaged = true
		opts.Logger.Warn("coldload: the cursor object is damaged; restoring without it: consumers come from the frames, shipped_through is not checked",
			"shard", shard, "err", p.cursorErr)
	}
	if p.empty() {
		rep.Empty = true
		if !opts.AllowEmpty {
			msg := "no watermark, cursor, segment or tail object"
			if len(p.unparsed) > 0 {
				msg += fmt.Sprintf(" (%d keys that do not parse, e.g. %s)", len(p.unparsed), p.unparsed[0])
			}
			return rep, p, fmt.Errorf("%w: shard %d: %s (wrong bucket or prefix?)", ErrEmpty, shard, msg)
		}
	}
	if e := p.checkWatermark(ctx, b); e != nil {
		if !opts.AllowWatermarkAhead {
			return rep, p, e
		}
		rep.WatermarkAhead = e.Error()
		opts.Logger.Warn("coldload: taking a watermark the bucket's objects do not support, as asked", "shard", shard, "err", e)
	}
	fsys := opts.Store.FS

	// The watermark goes first, so the store's base offset holds and its
	// segment ids start above every reclaimed one.
	if p.hasMark && (p.mark.Seq > 0 || p.mark.Segment > 0) {
		m := localseg.ReclaimManifest{ReclaimedThroughSeq: p.mark.Seq, ReclaimedThroughSegment: p.mark.Segment}
		if err := localseg.WriteReclaimManifest(fsys, tmp, m); err != nil {
			return rep, p, fmt.Errorf("coldload: write the reclaim manifest: %w", err)
		}
	}

	// Segments: read in parallel, verified, written as they arrive.
	items := h.segmentItems()
	var total int64
	for _, it := range items {
		total += it.size
	}
	for _, t := range p.tails {
		total += t.size
	}
	lazyK := 0
	if opts.Lazy {
		if lazyK, err = h.lazySplit(ctx, items, opts.LocalBytes); err != nil {
			return rep, p, err
		}
		for _, it := range items[:lazyK] {
			total -= it.size
		}
	}
	h.prog.setTotal(len(items)+len(p.tails)-lazyK, total)
	phase := opts.Now()
	h.fetchSegments(ctx, items)
	opts.Logger.Debug("coldload: segments read", "shard", shard, "segments", len(items), "took", opts.Now().Sub(phase))
	if err := h.firstFatal(); err != nil {
		return rep, p, err
	}
	pre, err := h.walkPrefix(ctx, items)
	if err != nil {
		return rep, p, err
	}
	if pre.gap != nil {
		if !opts.AllowPartial {
			return rep, p, pre.gap
		}
		rep.Gaps = append(rep.Gaps, pre.gap)
	}
	for _, it := range items[pre.n:] {
		if it.written {
			if err := localseg.RemoveSegmentFile(fsys, tmp, it.id); err != nil {
				return rep, p, fmt.Errorf("coldload: remove segment %d beyond the gap: %w", it.id, err)
			}
		}
	}
	if lazyK > 0 {
		if rep.Lazy, err = h.lazyCheck(items, lazyK, pre.lastSeq, opts.LocalBytes); err != nil {
			return rep, p, err
		}
	}
	for _, it := range items[lazyK:pre.n] {
		rep.Segments++
		rep.SegmentBytes += it.size
	}
	// localseg requires the ids on disk to be consecutive from the reclaim
	// base except across a recorded jump, so when a partial restore's
	// prefix ends below ids the bucket holds beyond a hole, those ids are
	// filled with empty sealed segments (they hold no frame; no sequence is
	// claimed by them), and the gaps the lineage allows are recorded as
	// jumps instead (keepIDs).
	//
	// A damaged segment passed over (damagedseg.go) is neither: its id is
	// a jump, so the store holds no file the bucket's object could be
	// compared with, and never writes its key.
	ids := make([]uint64, 0, pre.n+1)
	for _, it := range items[:pre.n] {
		if !it.damaged {
			ids = append(ids, it.id)
		}
	}
	firstFiller := p.mark.Segment + 1
	if pre.n > 0 {
		firstFiller = items[pre.n-1].id + 1
	}
	for id := firstFiller; id < rep.NextSegment; id++ {
		if next, ok := p.skipped(id); ok {
			id = next - 1
			continue
		}
		if pre.damagedLast != nil && id == pre.damagedLast.id {
			continue
		}
		if err := localseg.WriteSegmentFile(fsys, tmp, id, nil); err != nil {
			return rep, p, fmt.Errorf("coldload: create segment %d: %w", id, err)
		}
		ids = append(ids, id)
		rep.FillerSegments++
	}
	if err := keepIDs(fsys, tmp, p.mark.Segment, append(ids, rep.NextSegment)); err != nil {
		return rep, p, err
	}

	// Tail objects and the cursor object go through the ordinary durable
	// append path of a store: AppendRecovered. Opening the restored
	// directory itself would replay every segment just verified (it has no
	// checkpoint), a second pass over every frame. Instead the frames are
	// appended to a side store opened in a subdirectory whose reclaim
	// manifest puts its base at the end of the restored segments, so it
	// opens empty, with its first segment at NextSegment; its segment files
	// are then moved next to the restored ones. They are the files the
	// restored store would have written itself. The side store is opened
	// only when there is something to append.
	side := filepath.Join(tmp, sideDir)
	sideFS := &deferSyncFS{FS: fsys}
	var st *localseg.Store
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	open := func() (*localseg.Store, error) {
		if st != nil {
			return st, nil
		}
		if err := fsys.MkdirAll(side, 0o755); err != nil {
			return nil, fmt.Errorf("coldload: create %s: %w", side, err)
		}
		m := localseg.ReclaimManifest{ReclaimedThroughSeq: pre.lastSeq, ReclaimedThroughSegment: rep.NextSegment - 1}
		if err := localseg.WriteReclaimManifest(sideFS, side, m); err != nil {
			return nil, fmt.Errorf("coldload: write the append store's manifest: %w", err)
		}
		sopts := opts.Store
		sopts.ReadOnly, sopts.NoPreallocate, sopts.FS = false, true, sideFS
		// The recovered frames stay in one segment as far as the format
		// allows (MaxSegmentBytes): the store's active one, which a
		// takeover's jump moves whole to its cut's start_segment (docs/
		// FORMAT.md §3.11). A sealed one would keep an id below the fence,
		// or inside an earlier cut's gap, where readers skip it. The first
		// append seals it.
		sopts.SegmentMaxBytes = localseg.MaxSegmentBytes
		s, err := localseg.Open(side, sopts)
		if err != nil {
			return nil, fmt.Errorf("coldload: open the append store: %w", err)
		}
		st = s
		if got := st.Tip(); got != pre.lastSeq {
			return nil, fmt.Errorf("coldload: the append store starts at sequence %d, the segments end at %d", got, pre.lastSeq)
		}
		return st, nil
	}
	phase = opts.Now()
	tr, err := h.tailPhase(ctx, pre.lastSeq, opts.AllowPartial, func(frames []frame.Frame) error {
		s, err := open()
		if err != nil {
			return err
		}
		return s.AppendRecovered(frames)
	})
	rep.TailObjects, rep.TailSuperseded, rep.TailRecords = tr.used, tr.superseded, tr.records
	if pre.damagedLast != nil && (len(tr.gaps) > 0 || (err == nil && !h.lastAccepted(tr.cursor))) {
		// The events only the damaged last segment held are lost: its
		// error, never a gap or a shortened replay (damagedseg.go).
		return rep, p, pre.damagedLast.err
	}
	rep.Gaps = append(rep.Gaps, tr.gaps...)
	if err != nil {
		return rep, p, err
	}
	if rep.DamagedTails = tr.damaged; tr.damaged != nil {
		opts.Logger.Warn("coldload: skipped damaged tail objects holding only events beyond the cursor object's shipped_through (a put that landed damaged and was never put again); those events are not restored",
			"shard", shard, "keys", tr.damaged, "shipped_through", p.cursor.ShippedThrough, "restored_through", tr.cursor)
	}
	opts.Logger.Debug("coldload: tail objects applied", "shard", shard, "objects", tr.used, "took", opts.Now().Sub(phase))
	tip := tr.cursor
	if rep.DamagedSegments = pre.passed; pre.passed != nil {
		opts.Logger.Warn("coldload: passed over damaged segment objects: the last one, whose events the tail objects hold through the cursor object's shipped_through, or ones that held no event",
			"shard", shard, "keys", pre.passed, "shipped_through", p.cursor.ShippedThrough, "restored_through", tip)
	}
	if st != nil && st.Tip() != tip {
		return rep, p, fmt.Errorf("coldload: recovered through sequence %d, the store says %d", tip, st.Tip())
	}
	if h.cons != nil && tip > 0 {
		cp := planConsumers(h.cons, p.cursor.Consumers, p.cursor.Deleted, tip)
		h.consFinal = consumersAfter(h.cons, cp.frames)
		rep.ClampedCursors, rep.Consumers, rep.ConsumersDeleted = cp.clamped, cp.count, cp.deleted
		if len(cp.frames) > 0 {
			s, err := open()
			if err != nil {
				return rep, p, err
			}
			if err := s.AppendRecovered(cp.frames); err != nil {
				return rep, p, fmt.Errorf("coldload: apply the cursor object: %w", err)
			}
		}
		if len(cp.deleted) > 0 {
			opts.Logger.Info("coldload: consumers the cursor object no longer lists were deleted by their owner; deleted here too",
				"shard", shard, "consumers", cp.deleted)
		}
	}
	if tip > p.mark.Seq {
		rep.FirstSeq, rep.LastSeq = p.mark.Seq+1, tip
	}
	if p.cursor.ShippedThrough > tip {
		short := &ShortError{Shard: shard, Reached: tip, ShippedThrough: p.cursor.ShippedThrough}
		if !opts.AllowPartial {
			return rep, p, short
		}
		rep.Short = short
	}

	if st == nil {
		// Nothing appended: the empty next segment makes every restored
		// segment sealed, so the store appends (now and later) into an id
		// the bucket has never held.
		if err := localseg.WriteSegmentFile(fsys, tmp, rep.NextSegment, nil); err != nil {
			return rep, p, fmt.Errorf("coldload: create segment %d: %w", rep.NextSegment, err)
		}
	} else {
		err := st.Close()
		st = nil
		if err == nil {
			err = sideFS.Err()
		}
		if err != nil {
			return rep, p, fmt.Errorf("coldload: close the append store: %w", err)
		}
		if err := adoptSegments(fsys, sideFS.wasSynced, side, tmp, rep.NextSegment); err != nil {
			return rep, p, err
		}
	}
	if lazyK > 0 {
		if err := lazyImport(fsys, tmp, items[:lazyK], h.consFinal); err != nil {
			return rep, p, err
		}
	}
	if err := fsys.SyncDir(tmp); err != nil {
		return rep, p, fmt.Errorf("coldload: sync %s: %w", tmp, err)
	}
	return rep, p, nil
}

// sideDir is the subdirectory of the restore's temporary directory where
// the append store lives until its segments are adopted.
const sideDir = "append"

// adoptSegments moves the append store's segment files into dir (they
// must run consecutively from first) and removes the rest of the append
// store (its manifest, checkpoint and lock describe the side store only).
func adoptSegments(fsys localseg.FS, synced func(path string) bool, side, dir string, first uint64) error {
	if err := localseg.ImportSegments(fsys, synced, side, dir, first); err != nil {
		return fmt.Errorf("coldload: adopt the append store's segments: %w", err)
	}
	if err := localseg.RemoveTree(fsys, side); err != nil {
		return fmt.Errorf("coldload: remove %s: %w", side, err)
	}
	return nil
}

// checkEmpty refuses a target that holds anything; existed reports an
// empty directory already there.
func checkEmpty(fsys localseg.FS, dir string) (existed bool, err error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("coldload: read %s: %w", dir, err)
	}
	if len(names) > 0 {
		return true, fmt.Errorf("%w: %s holds %d entries (%s …)", ErrNotEmpty, dir, len(names), names[0])
	}
	return true, nil
}

// keepIDs records in dir's jumps.json every gap between the segment ids
// the restored store holds (ascending, the next segment last) above the
// reclaim base: the bucket's gaps are kept, not collapsed (docs/FORMAT.md
// §3.11, §9.3).
func keepIDs(fsys localseg.FS, dir string, base uint64, ids []uint64) error {
	prev := base
	for _, id := range ids {
		if id > prev+1 {
			if err := localseg.RecordJump(fsys, dir, prev+1, id); err != nil {
				return fmt.Errorf("coldload: record the segment-id jump %d..%d: %w", prev+1, id, err)
			}
		}
		prev = id
	}
	return nil
}
