package sim

// The second writer (issue 14, docs/FORMAT.md "Writer fencing"): two owners
// of one shard on the one bucket, each on its own disk and directory.
//
// A takeover makes the current owner a zombie: its Log is neither closed nor
// driven any more (a paused process: a GC stop, SIGSTOP, a partition), and a
// new owner opens on an empty disk of its own (claim, hydrate, cut). Later
// steps resume the zombie (appends, batches, ticks, seals, GC, pulls, acks,
// consumer deletes on its Log), restart it on its own disk (refused as a
// stale owner, changing nothing), or take the shard over again (the current
// owner becomes the zombie; the previous one is dropped: its process died).
// A takeover may also happen inside one of the current owner's requests
// (takeover-mid: before or after its tail put, before its HEAD of the next
// claim, after a segment put), the interleavings FENCING.md's tests list.
//
// What the oracle demands, exactly as the protocol promises:
//   - What the owner acknowledged while current is kept: the new owner's
//     adoption checks (adopt) that it serves everything the bucket was
//     reported to hold (every synchronous acknowledgment, every reported
//     shipment). Events the zombie acknowledged asynchronously but never
//     shipped lie beyond the cut: they may be lost by contract (they stay
//     in the zombie's directory, quarantined), and they must never be
//     visible — not in the new owner's log, not in a restore.
//   - A zombie's append after the takeover is acknowledged synchronously only
//     when the cut includes it (then it is checked like any acknowledgment:
//     present with its payload); one acknowledged asynchronously, or
//     answered "unknown", is visible only at or below the cut that ends its
//     epoch (checked on every record served: model.zombie).
//   - Once the zombie was answered fenced, every write it is asked for is
//     refused with the fenced class; a zombie's ship never commits a
//     shipment after the takeover.
//   - After the run, verify follows the lineage: no gap, conflict or lineage
//     problem, and it counts at least the objects the lineage rule skips
//     (zombie_objects), recounted here independently.
//
// -sim.nofence (Config.NoFence) presents the bucket to every writer as one
// without create-if-absent and compare-and-swap, so the engine runs
// unfenced at epoch 0 (its documented behaviour on such a bucket): the RED
// control, where the same oracle must find violations.
//
// The writer steps draw from their own random stream (Run: r.wr), so a seed
// whose stream never starts a takeover keeps its schedule.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sync"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
	"github.com/bucketlog/bucketlog/watermark"
)

// writerView is one Log's view of the shared bucket: a hook around its
// create-if-absent puts and HEADs, and the fencing switch of the RED control.
type writerView struct {
	blobtier.Bucket
	noCAS bool
	mu    sync.Mutex
	hook  func(op blobtier.Op, key string, after bool)
}

func (w *world) newView() blobtier.Bucket {
	w.view = &writerView{Bucket: w.bkt, noCAS: w.nofence}
	return w.view
}

func (v *writerView) CanCAS() bool { return !v.noCAS && v.Bucket.CanCAS() }

func (v *writerView) setHook(h func(blobtier.Op, string, bool)) {
	v.mu.Lock()
	v.hook = h
	v.mu.Unlock()
}

func (v *writerView) call(op blobtier.Op, key string, after bool) {
	v.mu.Lock()
	h := v.hook
	v.mu.Unlock()
	if h != nil {
		h(op, key, after)
	}
}

func (v *writerView) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	v.call(blobtier.OpPut, key, false)
	err := v.Bucket.PutIfAbsent(ctx, key, data, epoch)
	v.call(blobtier.OpPut, key, true)
	return err
}

func (v *writerView) Stat(ctx context.Context, key string) (blobtier.ObjectInfo, error) {
	v.call(blobtier.OpStat, key, false)
	info, err := v.Bucket.Stat(ctx, key)
	v.call(blobtier.OpStat, key, true)
	return info, err
}

// zombie is a paused (or resumed) owner that another owner took over from.
type zombie struct {
	log    *bucketlog.Log
	disk   *faultfs.MemFS
	live   string
	epoch  uint64
	fenced bool // it answered fenced once: every write must be refused
	nextC  int
}

// writerState is the run's part of the two-writer model.
type writerState struct {
	z      *zombie
	owners int               // directories made (live, live-2, …)
	ev     map[string]uint64 // payload → epoch: what a superseded owner wrote beyond what it may keep
	// retried: payload of ev → the current owner's tip when it took a
	// retry of it (retryFailed): a copy above that tip is the current
	// owner's own, whatever the retry answered.
	retried map[string]uint64
	linStep int // the step lin was read at (-1: never)
	lin     fencing.Lineage
	linErr  error
	took    int // takeovers
}

func (r *run) writerInit() {
	r.ws = &writerState{ev: map[string]uint64{}, retried: map[string]uint64{}, linStep: -1}
	r.m.zombie = r.zombieServed
}

// chainNow is the chain of the clean bucket's start records, read once a step.
func (r *run) chainNow(ctx context.Context) (fencing.Lineage, error) {
	if r.ws.linStep == r.step {
		return r.ws.lin, r.ws.linErr
	}
	r.ws.linStep = r.step
	r.ws.lin, r.ws.linErr = readLineage(ctx, r.w.clean())
	return r.ws.lin, r.ws.linErr
}

func readLineage(ctx context.Context, b blobtier.Bucket) (fencing.Lineage, error) {
	var recs []fencing.StartRecord
	for info, err := range b.List(ctx, 0, blobtier.KindStart) {
		if err != nil {
			return fencing.Lineage{}, err
		}
		data, _, err := b.Get(ctx, info.Key)
		if err != nil {
			return fencing.Lineage{}, err
		}
		rec, err := fencing.DecodeStartRecord(data)
		if err != nil {
			return fencing.Lineage{}, fmt.Errorf("%s: %w", info.Key, err)
		}
		recs = append(recs, rec)
	}
	return fencing.Chain(recs)
}

// zombieServed: a record a superseded owner wrote is served only at or
// below the cut that ends its epoch.
func (r *run) zombieServed(rec localseg.Record) *violation {
	ep, ok := r.ws.ev[rec.Payload]
	if !ok {
		return nil
	}
	if e, held := r.m.hist[rec.Seq]; held && e.payload == rec.Payload {
		// The current history holds it at this sequence: the client's
		// retry of an event whose first attempt a superseded owner
		// recovered after a crash (unknown outcome) went through the
		// current owner, which appended it anew (seed 153). Oracle, not
		// engine: the payload is no longer only the zombie's.
		return nil
	}
	if tip, ok := r.ws.retried[rec.Payload]; ok && rec.Seq > tip {
		// The same retry whose outcome was unknown (poisoned before its
		// answer): the current owner wrote it above its tip at the time,
		// and a restart that kept the page cache recovered it (seed
		// 2005359). A zombie's copy lies at or below that tip.
		return nil
	}
	lin, err := r.chainNow(simCtx())
	if err != nil {
		return fail("zombie-lineage", "read the lineage: %v", err)
	}
	if end, ended := lin.End(ep); !ended || rec.Seq > end || !lin.OnChain(ep) {
		return fail("zombie-visible", "sequence %d serves %s, which the owner of epoch %d wrote after it was superseded (its epoch ends at %d, ended=%v)",
			rec.Seq, short(rec.Payload), ep, end, ended)
	}
	return nil
}

// writerStep maybe runs one two-writer step instead of the schedule's op.
func (r *run) writerStep(ctx context.Context) (*violation, bool) {
	if r.ws == nil || r.w.log == nil && r.ws.z == nil {
		return nil, false
	}
	if r.ws.z == nil {
		if r.w.log == nil || r.wr.IntN(40) != 0 {
			return nil, false
		}
		if r.wr.IntN(2) == 0 {
			r.stats.Steps["takeover"]++
			return r.opTakeover(ctx), true
		}
		r.stats.Steps["takeover-mid"]++
		return r.opTakeoverMid(ctx), true
	}
	if r.wr.IntN(4) != 0 {
		return nil, false
	}
	switch n := r.wr.IntN(20); {
	case n < 15:
		r.stats.Steps["zombie-op"]++
		return r.opZombie(ctx), true
	case n < 17:
		r.stats.Steps["zombie-restart"]++
		return r.opZombieRestart(ctx), true
	case r.w.log != nil:
		r.stats.Steps["takeover-back"]++
		return r.opTakeover(ctx), true
	}
	return nil, false
}

// diskEpoch reads the epoch owner.json names on disk (0: none).
func diskEpoch(disk *faultfs.MemFS, dir string) uint64 {
	data, ok := disk.Files()[path.Clean("/"+localseg.OwnerPath(filepath.Join(dir, shard0)))]
	if !ok {
		return 0
	}
	var o struct {
		Epoch uint64 `json:"epoch"`
	}
	if json.Unmarshal(data, &o) != nil {
		return 0
	}
	return o.Epoch
}

// dropZombie: the zombie's process dies (its directory stays quarantined;
// what it wrote beyond the cut stays invisible).
func (r *run) dropZombie() {
	if z := r.ws.z; z != nil {
		_ = z.log.Close()
		r.ws.z = nil
	}
}

// closeZombie ends a run.
func (r *run) closeZombie() {
	if r.ws != nil {
		r.dropZombie()
	}
}

// takeoverNow makes the current owner the zombie and takes the shard over
// on a fresh disk, checking the adoption; the caller healed the bucket.
func (r *run) takeoverNow(ctx context.Context, why string) *violation {
	r.dropZombie()
	z := &zombie{log: r.w.log, disk: r.w.disk, live: r.w.live, epoch: diskEpoch(r.w.disk, r.w.dir())}
	r.ws.z = z
	r.w.log = nil
	r.ws.owners++
	r.w.live = fmt.Sprintf("-%d", r.ws.owners+1)
	r.w.disk = faultfs.NewMemFS()
	r.w.saved, r.savedLine = nil, nil // copies of the zombie's disk, not of this one
	r.ws.took++
	before := maps.Clone(r.m.hist)
	r.logf("takeover (%s): epoch %d paused in %s; a second owner opens on a fresh disk in live%s", why, z.epoch, "live"+z.live, r.w.live)
	if r.wr.IntN(4) == 0 {
		r.vanishClaim(z.epoch)
	}
	v := r.adopt(ctx, "takeover")
	if v != nil {
		return v
	}
	if r.w.log == nil && r.unrecoverable {
		return nil // data damaged at rest: nothing can be required (adopt)
	}
	if r.w.log == nil {
		return fail("takeover-open", "a takeover on an empty disk with a calm bucket failed to open")
	}
	tip := r.w.log.Store().Tip()
	for s, e := range before {
		if s > tip {
			r.ws.ev[e.payload] = z.epoch // acknowledged by the zombie, beyond the cut
		}
	}
	r.ws.linStep = -1
	return nil
}

// vanishClaim deletes the claim of the owner being taken over from when
// its start record exists (a lifecycle rule matching `ep.` keys, which
// the docs forbid, or an edited bucket): the takeover must count the
// start record as the claim, re-create it and claim above it, so the
// paused owner is still fenced (docs/FORMAT.md §6.9).
func (r *run) vanishClaim(epoch uint64) {
	if epoch == 0 {
		return
	}
	if _, ok := r.w.raw.Raw(blobtier.StartKey(0, epoch)); !ok {
		return
	}
	if err := r.w.raw.Delete(simCtx(), blobtier.ClaimKey(0, epoch), nil); err == nil {
		r.stats.Faults["claim-vanished"]++
		r.logf("fault: the claim of epoch %d vanished (its start record stays)", epoch)
	}
}

func (r *run) opTakeover(ctx context.Context) *violation {
	r.heal()
	return r.takeoverNow(ctx, "between requests")
}

// midPoints are where a takeover-mid runs the takeover in the current
// owner's requests: (op, key kind, after the request).
var midPoints = []struct {
	name  string
	op    blobtier.Op
	kind  blobtier.Kind
	after bool
}{
	{"before-tail-put", blobtier.OpPut, blobtier.KindTail, false},
	{"after-tail-put", blobtier.OpPut, blobtier.KindTail, true},
	{"before-head", blobtier.OpStat, blobtier.KindClaim, false},
	{"after-segment-put", blobtier.OpPut, blobtier.KindSegment, true},
}

// opTakeoverMid drives the current owner through appends (sync: one batch;
// async: appends then a ship) while the takeover runs inside one of its
// requests.
func (r *run) opTakeoverMid(ctx context.Context) *violation {
	r.heal()
	a, view := r.w.log, r.w.view
	pt := midPoints[r.wr.IntN(len(midPoints))]
	var tv *violation
	fired := false
	view.setHook(func(op blobtier.Op, key string, after bool) {
		if fired || op != pt.op || after != pt.after {
			return
		}
		if k, err := blobtier.ParseKey(key); err != nil || k.Kind != pt.kind {
			return
		}
		fired = true
		tv = r.takeoverNow(ctx, "inside the owner's request: "+pt.name)
	})
	defer view.setHook(nil)
	n := 1 + r.wr.IntN(4)
	evs := make([]event, n)
	les := make([]localseg.Event, n)
	for i := range evs {
		evs[i] = r.newEvent()
		les[i] = locEvent(evs[i])
	}
	if r.w.sync {
		if pt.kind == blobtier.KindSegment {
			if _, err := a.Ship(ctx, true); err != nil { // a seal first: the batch's group may put a segment
				r.logf("  (seal before: %s)", errClass(err))
			}
		}
		res, err := a.AppendBatch(ctx, les)
		view.setHook(nil)
		r.logf("takeover-mid %s: batch %d -> %d..%d %s (fired %v)", pt.name, n, res.FirstSequence, res.LastSequence, errClass(err), fired)
		if tv != nil {
			return tv
		}
		return r.zombieAppended(evs, res.FirstSequence, res.Appended, err, fired)
	}
	res, err := a.AppendBatch(ctx, les)
	r.logf("takeover-mid %s: batch %d -> %d..%d %s", pt.name, n, res.FirstSequence, res.LastSequence, errClass(err))
	if v := r.appended(evs, res.FirstSequence, err); v != nil {
		return v
	}
	before := a.ShippedThrough()
	rep, err := a.Ship(ctx, pt.kind == blobtier.KindSegment)
	view.setHook(nil)
	r.logf("takeover-mid %s: ship -> shipped %d tip %d %s (fired %v)", pt.name, rep.ShippedThrough, rep.Tip, errClass(err), fired)
	if tv != nil {
		return tv
	}
	if !fired {
		r.m.shipped = max(r.m.shipped, a.ShippedThrough())
		return nil
	}
	return r.zombieShipped(a, before, err)
}

func isFenced(err error) bool { return errors.Is(err, bucketlog.ErrFenced) }

// refusedPoisoned: a fenced writer whose local store a disk fault poisoned
// (the injector is the world's, shared with the zombie's disk) may answer
// poisoned instead of fenced: the store refuses first and nothing is
// written either way (seed 120 of -sim.writers; an oracle narrowing, not
// an engine change).
func refusedPoisoned(err error) bool { return errors.Is(err, localseg.ErrPoisoned) }

// zombieAppended judges an append answered by a writer that may have been
// superseded meanwhile (superseded: a takeover came before the answer).
func (r *run) zombieAppended(evs []event, first uint64, appended int, err error, superseded bool) *violation {
	z := r.ws.z
	if !superseded {
		return r.appended(evs, first, err)
	}
	switch {
	case isFenced(err):
		z.fenced = true
		for _, ev := range evs {
			r.m.failed[ev.payload] = &failure{step: r.step, ev: ev}
		}
		return nil
	case z.fenced && !refusedPoisoned(err):
		return fail("fenced-write-accepted", "a fenced writer's append was answered %s, not fenced", errClass(err))
	case err == nil && r.w.sync:
		// Acknowledged synchronously: the cut includes it (or the oracle
		// finds it missing or contradicted).
		for _, ev := range evs {
			r.ws.ev[ev.payload] = z.epoch
		}
		return r.appended(evs, first, nil)
	case err == nil || errors.Is(err, bucketlog.ErrNotInBucket):
		// Acknowledged locally only (async) or unknown: visible at most
		// within the cut.
		for _, ev := range evs {
			r.ws.ev[ev.payload] = z.epoch
		}
		return nil
	}
	for i, ev := range evs {
		if i < appended {
			r.ws.ev[ev.payload] = z.epoch
			continue
		}
		r.m.failed[ev.payload] = &failure{step: r.step, ev: ev}
	}
	return nil
}

// zombieShipped judges a superseded writer's ship: it never commits a
// shipment after the takeover.
func (r *run) zombieShipped(l *bucketlog.Log, before uint64, err error) *violation {
	z := r.ws.z
	switch {
	case isFenced(err):
		z.fenced = true
	case z.fenced && !refusedPoisoned(err):
		return fail("fenced-write-accepted", "a fenced writer's ship was answered %s, not fenced", errClass(err))
	case err == nil && l.ShippedThrough() > before && !r.w.nofence:
		return fail("zombie-shipped", "a superseded writer (epoch %d) committed a shipment %d -> %d after the takeover", z.epoch, before, l.ShippedThrough())
	}
	return nil
}

// opZombie resumes the zombie for one operation.
func (r *run) opZombie(ctx context.Context) *violation {
	z := r.ws.z
	l := z.log
	check := func(what string, err error) *violation {
		if isFenced(err) {
			z.fenced = true
			return nil
		}
		if z.fenced && !refusedPoisoned(err) {
			return fail("fenced-write-accepted", "a fenced writer's %s was answered %s, not fenced", what, errClass(err))
		}
		return nil
	}
	switch k := r.wr.IntN(9); k {
	case 0, 1, 2:
		n := 1 + r.wr.IntN(3)
		evs := make([]event, n)
		les := make([]localseg.Event, n)
		for i := range evs {
			evs[i] = r.newEvent()
			les[i] = locEvent(evs[i])
		}
		res, err := l.AppendBatch(ctx, les)
		r.logf("zombie (epoch %d) batch %d -> %d..%d %s", z.epoch, n, res.FirstSequence, res.LastSequence, errClass(err))
		return r.zombieAppended(evs, res.FirstSequence, res.Appended, err, true)
	case 3, 4:
		seal := k == 4
		before := l.ShippedThrough()
		rep, err := l.Ship(ctx, seal)
		r.logf("zombie (epoch %d) ship seal=%v -> shipped %d tip %d %s", z.epoch, seal, rep.ShippedThrough, rep.Tip, errClass(err))
		return r.zombieShipped(l, before, err)
	case 5:
		rep, err := l.GC(ctx, bucketlog.GCRequest{MinRetainedSegments: 1, MaxRetainedSegments: 1})
		r.logf("zombie (epoch %d) gc -> %s %s", z.epoch, rep.Outcome, errClass(err))
		return check("GC", err)
	case 6:
		z.nextC++
		name := fmt.Sprintf("z%d-%d", z.epoch, z.nextC)
		_, err := l.Pull(ctx, name, 1)
		r.logf("zombie (epoch %d) pull %s -> %s", z.epoch, name, errClass(err))
		return check("pull creating a consumer", err)
	default:
		snap, err := l.Store().Snapshot()
		if err != nil || len(snap.Consumers) == 0 {
			r.logf("zombie (epoch %d): no consumer", z.epoch)
			return nil
		}
		name := slices.Sorted(maps.Keys(snap.Consumers))[0]
		if k == 7 {
			seq := min(snap.Consumers[name]+1, snap.Tip)
			_, err = l.Ack(ctx, name, seq)
			r.logf("zombie (epoch %d) ack %s %d -> %s", z.epoch, name, seq, errClass(err))
			return check("ack", err)
		}
		err = l.DeleteConsumer(ctx, name)
		r.logf("zombie (epoch %d) delete %s -> %s", z.epoch, name, errClass(err))
		return check("consumer delete", err)
	}
}

// opZombieRestart restarts the zombie's process on its own disk: a one-shot
// open (NoBackground) of a stale owner's disk is refused and changes
// nothing; the zombie stays down.
func (r *run) opZombieRestart(ctx context.Context) *violation {
	z := r.ws.z
	err := z.log.Close()
	r.logf("zombie (epoch %d) close %s", z.epoch, errClass(err))
	r.ws.z = nil
	cur, disk, live, view := r.w.log, r.w.disk, r.w.live, r.w.view
	r.w.disk, r.w.live = z.disk, z.live
	oerr, changed := r.w.open(ctx)
	stale := r.w.log
	r.w.log, r.w.disk, r.w.live, r.w.view = cur, disk, live, view
	r.logf("zombie (epoch %d) restart on its disk -> %s", z.epoch, errClass(oerr))
	if oerr == nil {
		r.w.opens++ // the current Log is read in full again
		_ = stale.Close()
		if r.w.nofence {
			return nil
		}
		return fail("stale-owner-opened", "the superseded owner of epoch %d reopened its disk as a writer", z.epoch)
	}
	if changed != "" {
		return fail("refused-open-changed-disk", "the stale owner's refused open (%v) changed its directory: %s", oerr, changed)
	}
	return nil
}

// checkWritersEnd ends a run that took the shard over: verify follows the
// lineage (no gap, conflict or lineage problem) and counts at least the
// objects the lineage rule skips, recounted here from the bucket.
func (r *run) checkWritersEnd(ctx context.Context) *violation {
	if r.ws == nil || r.ws.took == 0 || r.damageOutstanding(false) || r.unrecoverable {
		return nil
	}
	b := r.w.clean()
	want, err := zombieObjects(ctx, b)
	if err != nil {
		return fail("writers-lineage", "recount the zombie objects: %v", err)
	}
	rep, err := bucketlog.Verify(ctx, "", b, coldload.VerifyOptions{Shards: []uint32{0}, ShardCount: 1, Concurrency: 1, Now: r.w.now})
	r.logf("writers end: verify -> %d problems, %d zombie objects (at least %d) %s", len(rep.Problems), zombieCount(rep), want, errClass(err))
	if err != nil {
		return fail("writers-verify", "verify after %d takeovers: %v", r.ws.took, err)
	}
	for _, p := range rep.Problems {
		if p.Class == coldload.ProblemGap || p.Class == coldload.ProblemConflict || p.Class == coldload.ProblemLineage {
			return fail("writers-verify", "verify after %d takeovers: %s %s: %s", r.ws.took, p.Class, p.Key, p.Detail)
		}
	}
	if got := zombieCount(rep); got < want && !r.w.nofence {
		return fail("writers-zombie-count", "verify counts %d zombie objects; the lineage rule skips at least %d", got, want)
	}
	return nil
}

func zombieCount(rep coldload.VerifyReport) int {
	if len(rep.Shards) == 0 {
		return 0
	}
	return rep.Shards[0].ZombieObjects
}

// zombieObjects counts the segment and tail objects the lineage rule skips
// whatever the watermark: a segment inside a cut's gap (above the
// watermark's segment), an epoch off the chain, a segment at or above the
// fence of the cut that ends its epoch, or events all beyond that cut —
// among objects with an event above the watermark.
func zombieObjects(ctx context.Context, b blobtier.Bucket) (int, error) {
	lin, err := readLineage(ctx, b)
	if err != nil {
		return 0, err
	}
	var mark, markSeg uint64
	if data, _, err := b.Get(ctx, blobtier.WatermarkKey(0)); err == nil {
		if wm, err := watermark.Decode(data); err == nil {
			mark, markSeg = wm.Seq, wm.Segment
		}
	}
	n := 0
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for info, err := range b.List(ctx, 0, kind) {
			if err != nil {
				return 0, err
			}
			if info.ParseErr != nil {
				continue
			}
			if id := info.Parsed.Segment; kind == blobtier.KindSegment && lin.Gap(id) {
				// Inside a cut's gap (the new owner continues at its
				// start_segment): a fenced writer's, skipped unread
				// above the watermark's segment.
				if id > markSeg {
					n++
				}
				continue
			}
			data, m, err := b.Get(ctx, info.Key)
			if err != nil {
				return 0, err
			}
			// Only events above the watermark count: an object wholly at
			// or below it is GC's to delete, not a zombie verify reports
			// (seed 292: a superseded epoch's segment below the mark).
			events, valid := 0, 0
			for f, err := range frame.Frames(data) {
				if err != nil {
					break
				}
				if f.Kind == frame.KindEvent && f.Seq > mark {
					events++
					if lin.ValidSeq(m.Epoch, f.Seq) {
						valid++
					}
				}
			}
			skipped := !lin.OnChain(m.Epoch) || kind == blobtier.KindSegment && lin.SkipSegment(m.Epoch, info.Parsed.Segment)
			if events > 0 && (skipped || valid == 0) {
				n++
			}
		}
	}
	return n, nil
}
