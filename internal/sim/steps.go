package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

func (r *run) newEvent() event {
	r.m.nextEv++
	n := r.m.nextEv
	ev := event{exec: fmt.Sprintf("ex-%d", r.rng.IntN(5)), txn: fmt.Sprintf("tx-%d", n), payload: fmt.Sprintf("p%d-%d", r.seed, n)}
	if r.rng.IntN(4) == 0 || r.burst {
		ev.payload += "=" + strings.Repeat("x", 40+r.rng.IntN(300)) // bigger events fill segments sooner
	}
	r.m.sent[ev.payload] = ev
	return ev
}

func locEvent(e event) localseg.Event {
	return localseg.Event{ExecutionID: e.exec, TransactionID: e.txn, Payload: e.payload}
}

// appended records the outcome of an append of evs (sequences first..).
func (r *run) appended(evs []event, first uint64, err error) *violation {
	switch {
	case err == nil || errors.Is(err, bucketlog.ErrNotInBucket):
		for i, ev := range evs {
			seq := first + uint64(i)
			if had, ok := r.m.hist[seq]; ok && had != ev {
				return fail("one-history", "append answered sequence %d for %s, which holds %s", seq, ev, had)
			}
			r.m.hist[seq] = ev
			r.m.bySeqAck[seq] = true
			if err == nil && r.w.sync {
				r.m.syncAcked = max(r.m.syncAcked, seq)
			}
		}
	default:
		for _, ev := range evs {
			r.m.failed[ev.payload] = &failure{step: r.step, ev: ev}
		}
	}
	return nil
}

func (r *run) opAppend(ctx context.Context) *violation {
	if v := r.maybeRetry(ctx); v != nil {
		return v
	}
	ev := r.newEvent()
	res, err := r.w.log.Append(ctx, locEvent(ev))
	r.logf("append %s -> seq %d %s", short(ev.payload), res.Seq, errClass(err))
	return r.appended([]event{ev}, res.Seq, err)
}

func (r *run) opBatch(ctx context.Context) *violation {
	n := 1 + r.rng.IntN(6)
	evs := make([]event, n)
	les := make([]localseg.Event, n)
	for i := range evs {
		evs[i] = r.newEvent()
		les[i] = locEvent(evs[i])
	}
	res, err := r.w.log.AppendBatch(ctx, les)
	r.logf("batch %d -> %d..%d %s", n, res.FirstSequence, res.LastSequence, errClass(err))
	if (err == nil || errors.Is(err, bucketlog.ErrNotInBucket)) && res.Appended != n {
		return fail("batch", "batch of %d answered %d appended", n, res.Appended)
	}
	if k := res.Appended; err != nil && !errors.Is(err, bucketlog.ErrNotInBucket) && k > 0 {
		// A storage error after a seal's fsync covered a prefix of the
		// batch comes with that prefix (Log.AppendBatch): acknowledged,
		// durable locally, not confirmed in the bucket; the rest failed.
		if k >= n || res.LastSequence-res.FirstSequence+1 != uint64(k) {
			return fail("batch", "failed batch of %d answered %d appended (%d..%d)", n, k, res.FirstSequence, res.LastSequence)
		}
		if v := r.appended(evs[:k], res.FirstSequence, bucketlog.ErrNotInBucket); v != nil {
			return v
		}
		evs = evs[k:]
	}
	return r.appended(evs, res.FirstSequence, err)
}

func (r *run) pickConsumer(create bool) string {
	names := slices.Sorted(maps.Keys(r.m.live))
	if create && (len(names) == 0 || (len(names) < 4 && r.rng.IntN(3) == 0)) {
		r.m.nextC++
		return fmt.Sprintf("c%d", r.m.nextC)
	}
	if len(names) == 0 {
		return ""
	}
	return names[r.rng.IntN(len(names))]
}

func (r *run) opPull() *violation {
	name := r.pickConsumer(true)
	res, err := r.w.log.Pull(simCtx(), name, 1+r.rng.IntN(8))
	r.logf("pull %s -> %d records %s", name, len(res.Records), errClass(err))
	if err != nil {
		return nil
	}
	if res.Exists {
		r.m.live[name] = true
	}
	for _, rec := range res.Records {
		if v := r.m.serve(rec, true); v != nil {
			return v
		}
		r.pulled[name] = max(r.pulled[name], rec.Seq)
	}
	return nil
}

func (r *run) opAck() *violation {
	name := r.pickConsumer(false)
	if name == "" || r.pulled[name] == 0 {
		r.logf("ack (nothing pulled)")
		return nil
	}
	seq := 1 + r.rng.Uint64N(r.pulled[name])
	got, err := r.w.log.Ack(simCtx(), name, seq)
	r.logf("ack %s %d -> %d %s", name, seq, got, errClass(err))
	return nil
}

func (r *run) opDelete() *violation {
	name := r.pickConsumer(false)
	if name == "" {
		r.logf("delete (no consumer)")
		return nil
	}
	err := r.w.log.DeleteConsumer(simCtx(), name)
	r.logf("delete %s %s", name, errClass(err))
	if err == nil {
		delete(r.m.live, name)
		r.m.deleted[name] = true
		r.undeliv[name] = true
	}
	return nil
}

// shipped notes what a shipping pass (or a sync append) reported.
func (r *run) noteShipped(err error) {
	r.m.shipped = max(r.m.shipped, r.w.log.ShippedThrough())
	if err == nil {
		for name := range r.undeliv {
			// A deletion a new disk undid (newDisk: it never shipped, and
			// the consumer came back from the bucket) is not a deletion
			// this pass can have shipped.
			if r.m.deleted[name] {
				r.m.delShip[name] = true
			}
		}
		clear(r.undeliv)
		// A damaged data object its owner deleted (to put it again) stays
		// a loss until it is shipped again, a tail object's events maybe
		// under another key: until a whole pass succeeded (past its
		// events), a restore or a hydrate may rightly refuse.
		for key := range r.damaged {
			k, _ := blobtier.ParseKey(key)
			if _, ok := r.w.raw.Raw(key); !ok && (k.Kind == blobtier.KindSegment ||
				k.Kind == blobtier.KindTail && r.w.log.ShippedThrough() >= k.LastSeq) {
				delete(r.damaged, key)
			}
		}
	}
}

func (r *run) opShip(ctx context.Context, seal bool) *violation {
	d := time.Duration(1+r.rng.IntN(45)) * time.Second
	if seal {
		d = 0
	}
	r.w.advance(d)
	segOnly := !r.w.inj.armedNow()
	for id := range r.w.rules {
		rule := r.ruleOf[id]
		spent := rule.Times > 0 && r.w.fb.Fired(id) >= rule.Times
		segOnly = segOnly && (spent || rule.Key == "noetl.ehdb.seg.*")
	}
	tip := r.w.log.Store().Tip()
	// Upload and tail failures make the shard not ready; only a poisoned
	// store or a stopped shipper excuses the tail.
	_, why := r.w.log.Health()
	ready := !strings.Contains(why, "poisoned") && !strings.Contains(why, "second writer")
	// Without a seal the pass is the periodic tick's (Log.Tick: the cursor
	// object's shipped_through written at most once per four ticks), as a
	// background engine runs it; with one, an explicit Ship.
	ship := r.w.log.Tick
	if seal {
		ship = func(ctx context.Context) (bucketlog.ShipReport, error) { return r.w.log.Ship(ctx, true) }
	}
	rep, err := ship(ctx)
	r.logf("ship seal=%v +%s -> shipped %d tip %d %s", seal, d, rep.ShippedThrough, rep.Tip, errClass(err))
	r.noteShipped(err)
	r.noteEvicted() // evict.go
	if v := r.checkRepaired(err); v != nil {
		return v
	}
	// A segment that cannot upload must not keep the tail from shipping
	// (finding 4: a partly failed upload pass and a GC stall it).
	if segOnly && ready && !r.known[4] && r.w.log.ShippedThrough() < tip && !r.staleSingleTail(ctx) && !r.localDamageStallsTail(err) {
		return fail("tail-stalled", "with faults only on segment objects, a ship pass left shipped_through at %d below the tip %d", r.w.log.ShippedThrough(), tip)
	}
	return nil
}

func (r *run) opGC(ctx context.Context) *violation {
	req := bucketlog.GCRequest{MinRetainedSegments: 2, Sweep: r.rng.IntN(3) == 0}
	if r.rng.IntN(2) == 0 {
		req.MaxRetainedSegments = 2 + r.rng.IntN(3)
	}
	rep, err := r.w.log.GC(ctx, req)
	r.logf("gc keep=%d sweep=%v -> %s base %d %s", req.MaxRetainedSegments, req.Sweep, rep.Outcome, rep.Base, errClass(err))
	return nil
}

// bucketRule is one random faultbucket rule.
func (r *run) bucketRule() faultbucket.Rule {
	keys := []string{"noetl.ehdb.seg.*", "noetl.ehdb.tail.*", "noetl.ehdb.rw.*", "noetl.ehdb.cur.*", "*"}
	kinds := faultbucket.Kinds
	for {
		k := kinds[r.rng.IntN(len(kinds))]
		rule := faultbucket.Rule{Kind: k, Key: keys[r.rng.IntN(len(keys))], Times: 1 + r.rng.IntN(3)}
		if r.rng.IntN(2) == 0 {
			rule.Prob = 0.5
		}
		ops := []faultbucket.Op{faultbucket.OpRead, faultbucket.OpWrite, faultbucket.OpStat, faultbucket.OpList, faultbucket.OpDelete}
		switch k {
		case faultbucket.Refuse:
			rule.Op = ops[r.rng.IntN(len(ops))]
			rule.Code = []gcerrors.ErrorCode{gcerrors.Internal, gcerrors.ResourceExhausted, gcerrors.DeadlineExceeded}[r.rng.IntN(3)]
			if rule.Op == faultbucket.OpList {
				rule.Key = ""
			}
		case faultbucket.Delay:
			rule.Op, rule.Delay = ops[r.rng.IntN(len(ops))], time.Microsecond
		case faultbucket.LostAck:
			rule.Op = []faultbucket.Op{faultbucket.OpWrite, faultbucket.OpDelete}[r.rng.IntN(2)]
		case faultbucket.Truncate, faultbucket.Extend, faultbucket.Corrupt:
			rule.Op = []faultbucket.Op{faultbucket.OpRead, faultbucket.OpWrite}[r.rng.IntN(2)]
			if rule.Op == faultbucket.OpWrite && r.skipWriteDamage(rule.Key) {
				continue
			}
		case faultbucket.Hide:
			rule.Op, rule.Times, rule.Listings = faultbucket.OpList, 0, 1+r.rng.IntN(3)
		}
		if rule.Op == faultbucket.OpRead && rule.Key == "noetl.ehdb.seg.*" && rule.Times == 3 {
			// A third of the segment read rules hit only the ranged reads
			// of a lazy hydrate (the heads giving first events), derived
			// without a draw so every seed keeps its schedule.
			rule.Op = faultbucket.OpRangeRead
		}
		return rule
	}
}

func (r *run) opBucketFault() *violation {
	rule := r.bucketRule()
	id := r.w.fb.MustAdd(rule)
	r.w.rules[id] = r.step + 1 + r.rng.IntN(8)
	r.ruleOf[id] = rule
	r.stats.Faults["bucket-rule:"+string(rule.Kind)]++
	r.logf("fault bucket %s %s %s prob=%.1f times=%d", rule.Kind, rule.Op, rule.Key, rule.Prob, rule.Times)
	return nil
}

// opUploadStall lets one segment upload through and then refuses segment
// uploads for a while, and fails one tail put: a partly failed upload pass
// with the tail behind it, the ground finding 4 needs.
func (r *run) opUploadStall() *violation {
	a := faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.seg.*", Skip: r.rng.IntN(2)}
	b := faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*", Times: 1 + r.rng.IntN(2)}
	for _, rule := range []faultbucket.Rule{a, b} {
		id := r.w.fb.MustAdd(rule)
		r.w.rules[id] = r.step + 6 + r.rng.IntN(10)
		r.ruleOf[id] = rule
	}
	r.stats.Faults["upload-stall"]++
	r.logf("fault upload stall skip=%d tail-times=%d", a.Skip, b.Times)
	if r.w.log == nil || r.rng.IntN(2) == 0 {
		return nil
	}
	// Directed: a burst the tail has not shipped, spanning segments, then
	// ship, GC and ship again.
	r.burst = true
	for range 4 {
		if v := r.opBatch(simCtx()); v != nil || r.w.log == nil {
			r.burst = false
			return v
		}
	}
	r.burst = false
	ctx := simCtx()
	for _, f := range []func() *violation{
		func() *violation { return r.opShip(ctx, false) },
		func() *violation { return r.opGC(ctx) },
		func() *violation { return r.opShip(ctx, false) },
		func() *violation { return r.opShip(ctx, false) },
	} {
		if r.w.log == nil {
			return nil
		}
		if v := f(); v != nil {
			return v
		}
	}
	return nil
}

func (r *run) opDiskFault() *violation {
	errno := []syscall.Errno{syscall.ENOSPC, syscall.EIO}[r.rng.IntN(2)]
	k := int64(r.rng.IntN(12))
	r.w.inj.arm(k, errno)
	r.stats.Faults["disk-armed:"+errno.Error()]++
	r.logf("fault disk %v at write op +%d", errno, k)
	return nil
}

func (r *run) heal() {
	r.w.fb.Clear()
	clear(r.w.rules)
	r.w.inj.disarm()
}

// opDamage damages an object at rest: the watermark, the cursor object, or
// a segment or tail object.
func (r *run) opDamage() *violation {
	var key, what string
	switch r.rng.IntN(4) {
	case 0:
		if r.known[7] {
			return nil
		}
		key, what = blobtier.WatermarkKey(0), "watermark"
	case 1:
		if r.known[5] {
			return nil
		}
		key, what = blobtier.CursorKey(0), "cursor"
	default:
		var keys []string
		if !r.known[2] && r.w.damagesSegments() { // finding 2: a damaged segment object counts as durable; evict.go
			keys = r.w.raw.Keys(blobtier.ListPrefix(0, blobtier.KindSegment))
		}
		if !r.known[15] { // a damaged tail object bricks Open and restore
			keys = append(keys, r.w.raw.Keys(blobtier.ListPrefix(0, blobtier.KindTail))...)
		}
		if len(keys) == 0 {
			return nil
		}
		key, what = keys[r.rng.IntN(len(keys))], "data"
	}
	data, ok := r.w.raw.Raw(key)
	if !ok || len(data) == 0 {
		r.logf("damage %s: absent", what)
		return nil
	}
	if r.rng.IntN(2) == 0 {
		data = data[:len(data)/2]
	} else {
		data[r.rng.IntN(len(data))] ^= 0x10
	}
	r.w.raw.SetRaw(key, data)
	r.damaged[key] = string(data)
	if what == "watermark" {
		r.wmDamaged = true
	}
	r.stats.Faults["at-rest:"+what]++
	r.logf("damage %s at rest", what)
	if what == "watermark" && len(r.w.saved) > 0 && r.w.log != nil && r.rng.IntN(3) > 0 {
		// Directed: the oldest copy of the disk meets the damaged mark,
		// whose repair must not lower it (finding 7).
		return r.older(simCtx(), 0)
	}
	return nil
}

// damageOutstanding reports whether a data object damaged at rest is still
// damaged (a restore may then rightly refuse). A damaged segment or tail
// object its owner deleted is outstanding until it shipped again
// (noteShipped): the owner puts it again from the local copy on its next
// pass, and until then the bucket lacks it (coldload does not bridge a
// missing segment with tail objects when later segments follow).
func (r *run) damageOutstanding(dataOnly bool) bool {
	for key, bad := range r.damaged {
		k, _ := blobtier.ParseKey(key)
		if dataOnly && k.Kind != blobtier.KindSegment && k.Kind != blobtier.KindTail {
			continue
		}
		cur, ok := r.w.raw.Raw(key)
		if ok && string(cur) == bad || !ok {
			return true
		}
	}
	return false
}

var errOpen = errors.New("sim: open refused")

// reopen opens the Log on the current disk, checking that a refusal changed
// nothing.
func (r *run) reopen(ctx context.Context, why string) (*violation, error) {
	r.w.inj.takeFired()
	faults, hides := r.w.fb.Total(), r.tailHides()
	lazy := r.w.lazyOwners
	err, changed := r.w.open(ctx)
	r.logf("open (%s) -> %s", why, errClass(err))
	r.noteHiddenOpen(hides) // directed.go
	if r.w.lazyOwners > lazy {
		r.stats.Steps["open:lazy-hydrate"]++
	}
	if err != nil {
		r.stats.Refused++
		// An open that failed on an injected disk error is no refusal.
		// Nor is one that failed on an injected bucket request failure
		// (a refused request, or a read answered damaged while the
		// object at rest is whole), not on a decision about the disk:
		// a failed attempt, retried, whose only changes are the local
		// crash repair every writable open makes first (zeroing torn,
		// never acknowledged bytes after the durable end: so only
		// segments changed in place are excused, never a removed file or
		// reclaim.json). The refusals that must change nothing (finding
		// 1) are decisions about the disk (stale, diverged, second
		// writer, foreign bucket), and a damaged object (class 15) stays
		// checked.
		var injected *faultbucket.Error
		repairOnly := errors.As(err, &injected) && requestFailed(injected.Kind) ||
			r.w.fb.Total() > faults && errClass(err) == "err=corrupt_object" && !r.damagedAtRest(err.Error())
		var adopted func(string) bool
		if repairOnly {
			adopted = r.adoptedMark(ctx)
		}
		for _, c := range strings.Fields(changed) {
			repairOnly = repairOnly && (strings.HasPrefix(c, "~") && localseg.IsSegmentFile(path.Base(strings.TrimPrefix(c, "~"))) ||
				adopted != nil && adopted(c))
		}
		if changed != "" && !r.w.inj.takeFired() && !r.known[1] && !repairOnly {
			return fail("refused-open-changed-disk", "Open refused (%v) and changed the shard directory: %s", err, changed), err
		}
		return nil, err
	}
	return nil, nil
}

func (r *run) markUnknown() {
	for _, f := range r.m.failed {
		f.unknown = true
	}
}

// skipWriteDamage: damaged uploads of a kind whose finding is suppressed
// (2: segments; 5: the cursor object; 15: tail objects, found by the
// simulation; 7: the watermark).
func (r *run) skipWriteDamage(key string) bool {
	all := key == "*"
	return (r.known[2] && (all || key == "noetl.ehdb.seg.*")) ||
		(r.known[5] && (all || key == "noetl.ehdb.cur.*")) ||
		(r.known[15] && (all || key == "noetl.ehdb.tail.*")) ||
		(r.known[7] && (all || key == "noetl.ehdb.rw.*"))
}

// damagedAtRest reports whether msg names an object still damaged at rest.
func (r *run) damagedAtRest(msg string) bool {
	for key, bad := range r.damaged {
		if cur, ok := r.w.raw.Raw(key); ok && string(cur) == bad && strings.Contains(msg, key) {
			return true
		}
	}
	return false
}

func (r *run) watermarkDamaged() bool {
	key := blobtier.WatermarkKey(0)
	bad, ok := r.damaged[key]
	cur, exists := r.w.raw.Raw(key)
	return ok && exists && string(cur) == bad
}

// noteWatermarkWriteDamage notes a damaging write rule on the watermark that
// fired: the damaged mark may have been repaired within the same step.
func (r *run) noteWatermarkWriteDamage() {
	for id := range r.w.rules {
		rule := r.ruleOf[id]
		switch rule.Kind {
		case faultbucket.Truncate, faultbucket.Extend, faultbucket.Corrupt:
		default:
			continue
		}
		if rule.Op != faultbucket.OpWrite || (rule.Key != "noetl.ehdb.rw.*" && rule.Key != "*") {
			continue
		}
		if n := r.w.fb.Fired(id); n > r.wmFired[id] {
			r.wmFired[id] = n
			r.wmDamaged = true
		}
	}
}

// repairedLower judges a watermark below the highest one seen. A damaged
// watermark's value is lost; issue 12 finding 7 asks its repair to be
// "never below what the bucket's retained objects imply", and the engine
// cannot know more (a GC that committed the mark and died before deleting
// anything leaves every object retained, so the repair may rightly go back
// to the local base). So a lower mark after damage is accepted when the
// bucket still holds everything above it (verify finds no gap: a restore
// never looks for reclaimed events); any other lower mark is a violation.
func (r *run) repairedLower(ctx context.Context, clean blobtier.Bucket, m watermark.Mark) *violation {
	if !r.wmDamaged {
		return fail("watermark-backward", "the watermark moved from %d to %d", r.m.wm, m.Seq)
	}
	rep, err := bucketlog.Verify(ctx, "", clean, coldload.VerifyOptions{Shards: []uint32{0}, ShardCount: 1, Concurrency: 1, Now: r.w.now})
	if err != nil || r.damageOutstanding(true) {
		r.logf("  (the damaged watermark was repaired lower, %d -> %d)", r.m.wm, m.Seq)
		return nil
	}
	for _, p := range rep.Problems {
		if p.Class == coldload.ProblemGap {
			return fail("watermark-backward", "the damaged watermark was repaired from %d to %d, below a gap: %s %s", r.m.wm, m.Seq, p.Key, p.Detail)
		}
	}
	r.logf("  (the damaged watermark was repaired lower, %d -> %d; the bucket holds all above it)", r.m.wm, m.Seq)
	return nil
}

// staleSingleTail reports whether a stale writer's tail object of one
// event occupies the key of the owner's next single-event batch (an older
// epoch's object). No tail object of the owner's can carry that event
// under another key when it ends its segment, and the owner deletes no
// other epoch's object (docs/FORMAT.md, "Writer fencing": a single
// event's batch ships in a sealed segment instead), so with segment puts
// failing the tail rightly waits for them (seed 2149 of -sim.writers): the
// one-writer demand of finding 4 does not hold there. One writer meets it
// too: a hydrate after a disk loss claims a new epoch, and the lost disk's
// owner's one-event tail object at the hydrated tip, damaged at rest
// afterwards, occupies that key (seed 305058: the new owner left its event
// out of the shipped position and cannot delete the older epoch's object).
func (r *run) staleSingleTail(ctx context.Context) bool {
	if r.w.log == nil {
		return false
	}
	next := r.w.log.ShippedThrough() + 1
	info, err := r.w.clean().Stat(ctx, blobtier.TailKey(0, next, next))
	return err == nil && info.Meta.Epoch < r.w.log.Status().Epoch
}
