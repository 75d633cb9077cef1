package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

func (r *run) opRestartKeep(ctx context.Context) *violation {
	segs, reclaimedSeg := r.liveSegments()
	err := r.w.close()
	r.logf("close %s", errClass(err))
	r.markUnknown()
	r.noteMustRepair(ctx, segs, reclaimedSeg)
	r.stats.Restarts["keep"]++
	if !r.known[8] {
		if v := r.checkAnotherBucket(ctx); v != nil {
			return v
		}
	}
	v, _ := r.reopen(ctx, "disk kept")
	return v
}

// checkAnotherBucket opens the stopped shard naming a bucket it never
// shipped to (a typo in the URL): the open must be refused as usage before
// it changes a byte (issue 12, finding 8). It draws no random number, so
// it leaves every seed's schedule as it was.
func (r *run) checkAnotherBucket(ctx context.Context) *violation {
	files := r.w.disk.Files()
	if r.w.emptyStoreIn(files) || !r.w.hasBucketRecordIn(files) {
		return nil
	}
	r.stats.Steps["open-another-bucket"]++
	r.w.bucketURL = otherBucketURL
	defer func() { r.w.bucketURL = simBucketURL }()
	before := digestFiles(files, r.w.dir())
	if err := mirrorFiles(files, r.w.dir()); err != nil {
		return fail("sim", "mirror: %v", err)
	}
	l, err := bucketlog.Open(ctx, r.w.options())
	r.logf("open naming another bucket -> %s", errClass(err))
	if err == nil {
		l.Close()
		return fail("another-bucket-accepted", "a store that ships to %s opened with %s", simBucketURL, otherBucketURL)
	}
	if changed := diffFiles(before, diskFiles(r.w.disk, r.w.dir())); changed != "" {
		return fail("refused-open-changed-disk", "the open naming another bucket (%v) changed the disk: %s", err, changed)
	}
	if !errors.Is(err, bucketlog.ErrUsage) {
		return fail("another-bucket-accepted", "the open naming another bucket failed as %s, not usage: %v", errClass(err), err)
	}
	return nil
}

func (r *run) opCrash(ctx context.Context) *violation {
	torn := r.rng.IntN(2) == 0
	segs, reclaimedSeg := r.liveSegments()
	r.w.crash(torn, r.rng.Uint64())
	if torn {
		r.markUnknown()
		r.stats.Restarts["crash-torn"]++
	} else {
		r.stats.Restarts["crash"]++
	}
	r.logf("crash torn=%v", torn)
	r.noteMustRepair(ctx, segs, reclaimedSeg)
	v, _ := r.reopen(ctx, "after crash")
	return v
}

// opCrashMid kills the process at the k-th disk write of an append (or of
// the ship pass after it), then restarts on what a power cut leaves.
func (r *run) opCrashMid(ctx context.Context) *violation {
	k := int64(r.rng.IntN(8))
	r.w.inj.crashAt(k)
	r.logf("crash armed at write op +%d", k)
	before := len(r.m.failed)
	var v *violation
	if r.rng.IntN(2) == 0 {
		v = r.opBatch(ctx)
	} else {
		v = r.opAppend(ctx)
	}
	if v == nil && r.rng.IntN(2) == 0 {
		v = r.opShip(ctx, r.rng.IntN(2) == 0)
	}
	r.w.inj.endCrash()
	if v != nil {
		return v
	}
	// The appends the crash cut off got no answer: their outcome is unknown.
	if len(r.m.failed) > before {
		r.markUnknown()
	}
	r.stats.Restarts["crash-mid-op"]++
	torn := r.rng.IntN(2) == 0
	r.w.crash(torn, r.rng.Uint64())
	if torn {
		r.markUnknown()
	}
	r.logf("crash torn=%v", torn)
	v, _ = r.reopen(ctx, "after crash mid-op")
	return v
}

// hydrated opens a Log on a disk that does not hold the history (empty, or
// an older copy) and checks that it serves everything the bucket was
// reported to hold, then makes it the model's disk.
func (r *run) adopt(ctx context.Context, why string) *violation {
	// A disk lost while a segment, tail object or the watermark is damaged
	// at rest has lost what only its copy held: the run cannot recover,
	// and ends (see loop).
	if r.damageOutstanding(true) || r.watermarkUnreadable(ctx) || r.lostWithUnshippedDamage(ctx) || r.lostWithOnlyAWatermark(ctx) ||
		r.lostWithDamagedSegment(ctx) {
		r.unrecoverable = true
		r.logf("  (data damaged at rest and the disk gone: unrecoverable)")
	}
	curBad := r.cursorDamaged(ctx)
	vouched := r.cursorShipped(ctx)
	v, err := r.reopen(ctx, why)
	if v != nil || err != nil {
		return v
	}
	got, err := readLog(r.w.log)
	if err != nil {
		return fail("read", "read the log after %s: %v", why, err)
	}
	if v := r.m.checkRestore(got, true); v != nil && !(v.check == "deleted-consumer" && (r.known[6] || curBad)) {
		if !r.lostUnrecoverably(v, got, vouched) {
			v.check = "adopt-" + v.check
			return v
		}
	}
	r.logf("  adopted: base %d tip %d", got.base, got.tip)
	r.m.newDisk(got)
	r.newLineage()
	clear(r.mustRepair)
	if curBad {
		r.forgetLostDeletions(got)
	}
	if r.known[6] {
		clear(r.m.deleted) // finding 6: deleted consumers may come back
	}
	return nil
}

func (r *run) opLost(ctx context.Context) *violation {
	r.w.abandon()
	r.w.disk = faultfs.NewMemFS()
	r.stats.Restarts["lost"]++
	r.logf("disk lost")
	// A hydrate reads the bucket with parallel requests; faults would make
	// the schedule depend on their order, so the bucket is calm meanwhile.
	r.heal()
	return r.adopt(ctx, "lost disk")
}

func (r *run) opSave() *violation {
	if r.w.log == nil {
		return nil
	}
	r.w.saved = append(r.w.saved, r.w.disk.CrashClone(faultfs.CrashOptions{}))
	r.savedLine = append(r.savedLine, r.lineage)
	if len(r.w.saved) > 3 {
		r.w.saved, r.savedLine = r.w.saved[1:], r.savedLine[1:]
	}
	r.logf("save a copy of the disk (%d kept)", len(r.w.saved))
	return nil
}

// opOlder replaces the disk with an older copy of itself: it must be
// refused as stale (changing nothing) or serve all the bucket holds.
func (r *run) opOlder(ctx context.Context) *violation {
	if len(r.w.saved) == 0 {
		return nil
	}
	return r.older(ctx, r.rng.IntN(len(r.w.saved)))
}

func (r *run) older(ctx context.Context, pick int) *violation {
	err := r.w.close()
	r.logf("close %s", errClass(err))
	r.markUnknown()
	current := r.w.disk
	r.w.disk = r.w.saved[pick].CrashClone(faultfs.CrashOptions{})
	r.stats.Restarts["older"]++
	r.heal()
	curBad := r.cursorDamaged(ctx)
	wmBefore, wmHad := r.w.raw.Raw(blobtier.WatermarkKey(0))
	wmBad, hydrates := r.watermarkDamaged(), r.w.emptyStore()
	v, oerr := r.reopen(ctx, "older copy")
	if v != nil {
		return v
	}
	if oerr != nil && !hydrates {
		if v := r.refusedKeepsWatermark(wmBefore, wmHad, wmBad, oerr); v != nil {
			return v
		}
	}
	if oerr != nil {
		r.w.disk = current
		v, _ := r.reopen(ctx, "current disk back")
		return v
	}
	r.forkedCopy(pick)
	got, err := readLog(r.w.log)
	if err != nil {
		return fail("read", "read the log on the older copy: %v", err)
	}
	if v := r.m.checkRestore(got, true); v != nil && !(v.check == "deleted-consumer" && (r.known[6] || curBad)) {
		v.check = "older-accepted-" + v.check
		return v
	}
	r.m.newDisk(got)
	clear(r.mustRepair)
	if curBad {
		r.forgetLostDeletions(got)
	}
	if r.known[6] {
		clear(r.m.deleted)
	}
	return nil
}

// forgetLostDeletions: the new disk came from a bucket whose cursor object
// was damaged (see cursorDamaged), so the deletions it serves consumers of
// were lost with it; they are alive again in the model.
func (r *run) forgetLostDeletions(got restored) {
	for name := range got.consumers {
		if r.m.deleted[name] {
			delete(r.m.deleted, name)
			delete(r.m.delShip, name)
			r.logf("  (consumer %s is back: its deletion was lost with the damaged cursor object)", name)
		}
	}
}

// opLoseSegment deletes the highest segment file: the open must refuse (a
// shorter log is not the log), or serve every acknowledged event.
func (r *run) opLoseSegment(ctx context.Context) *violation {
	// Events not shipped yet make the loss visible only locally.
	if v := r.opBatch(ctx); v != nil {
		return v
	}
	r.w.crash(false, 0) // killed: no last shipment
	r.logf("kill")
	dir := path.Clean("/" + filepath.Join(r.w.dir(), shard0))
	var segs []string
	mark := []byte(fmt.Sprintf("p%d-", r.seed))
	for name, data := range r.w.disk.Files() {
		// The highest segment that holds events (the active one may be
		// empty right after a seal).
		if path.Dir(name) == dir && localseg.IsSegmentFile(path.Base(name)) && bytes.Contains(data, mark) {
			segs = append(segs, name)
		}
	}
	slices.Sort(segs)
	r.stats.Restarts["segment-lost"]++
	if len(segs) > 0 {
		_ = r.w.disk.Remove(segs[len(segs)-1])
		_ = r.w.disk.SyncDir(dir)
		r.logf("lose %s", path.Base(segs[len(segs)-1]))
	}
	r.markUnknown()
	v, oerr := r.reopen(ctx, "a segment lost")
	if v != nil {
		return v
	}
	if oerr != nil {
		// The operator follows the error's advice: hydrate from the bucket.
		r.w.disk = faultfs.NewMemFS()
		r.heal()
		return r.adopt(ctx, "hydrate after the lost segment")
	}
	return nil // the per-step check sees whether every acknowledged event is there
}

func (r *run) opRestore(ctx context.Context, strict bool) *violation {
	r.stats.Restores++
	curBad := r.cursorDamaged(ctx)
	got, err := r.restoreVariant(ctx) // every other one lazy (evict.go)
	r.logf("restore -> %d records base %d tip %d %s", len(got.records), got.base, got.tip, errClass(err))
	if err != nil {
		if errors.Is(err, errExecRead) {
			return fail("exec-read", "the restored store: %v", err)
		}
		if r.damageOutstanding(true) || (!strict && (r.damageOutstanding(false) || r.watermarkUnreadable(ctx) || r.writeDamageExcusesRestore(ctx))) {
			return nil
		}
		return fail("restore-failed", "restore from the clean bucket failed: %v", err)
	}
	v := r.m.checkRestore(got, true)
	if v != nil && v.check == "deleted-consumer" && (r.known[6] || curBad) {
		r.logf("  (the cursor object is damaged: consumers come from the frames)")
		return nil
	}
	if v != nil && r.damageOutstanding(true) && v.check == "restore-missing" {
		return nil
	}
	return v
}

func (r *run) opVerify(ctx context.Context) *violation {
	rep, err := bucketlog.Verify(ctx, "", r.w.clean(), coldload.VerifyOptions{Shards: []uint32{0}, ShardCount: 1, Concurrency: 1, Now: r.w.now})
	r.logf("verify -> %d problems %s", len(rep.Problems), errClass(err))
	if err != nil || r.damageOutstanding(false) {
		return nil
	}
	for _, p := range rep.Problems {
		switch p.Class {
		case coldload.ProblemGap, coldload.ProblemConflict, coldload.ProblemCursor:
			return fail("verify", "verify on an undamaged bucket: %s %s: %s", p.Class, p.Key, p.Detail)
		}
	}
	return nil
}

// opForge writes a valid watermark far above the shard (an attack, not a
// fault): verify must report it and a restore must refuse or keep every
// event. It ends the run: no owner can tell a forged mark from a real one.
func (r *run) opForge(ctx context.Context) *violation {
	data := watermark.Mark{Seq: 999_999, Segment: 999_999, V: 1 << 40}.Encode()
	if err := r.w.bkt.Put(ctx, blobtier.WatermarkKey(0), data); err != nil {
		r.logf("forge watermark -> %s", errClass(err))
		return nil
	}
	r.stats.Faults["forged-watermark"]++
	r.logf("forge watermark at 999999")
	rep, err := bucketlog.Verify(ctx, "", r.w.clean(), coldload.VerifyOptions{Shards: []uint32{0}, ShardCount: 1, Concurrency: 1, Now: r.w.now})
	if err == nil && len(rep.Problems) == 0 {
		return fail("forged-watermark-verify", "verify reports no problem for a watermark at 999999 (tip %d)", r.m.floor())
	}
	got, err := r.w.restore(ctx)
	r.stats.Restores++
	if err != nil {
		return nil
	}
	r.m.wm = 0 // the forged mark must not excuse a short restore
	if v := r.m.checkRestore(got, true); v != nil {
		v.check = "forged-watermark-" + v.check
		return v
	}
	return nil
}

// cursorDamaged reports whether the cursor object at rest is damaged. A
// restore then takes the consumers from the frames alone (issue 12 finding
// 5), and a deletion whose only record in the bucket was the cursor object
// (a ConsumerDelete after the last event never rides in a tail object) may
// come back: the contract cannot promise more, whether the object was
// damaged at rest or by its put (a damaging write fault).
func (r *run) cursorDamaged(ctx context.Context) bool {
	data, _, err := r.w.clean().Get(ctx, blobtier.CursorKey(0))
	if err != nil {
		return errors.Is(err, blobtier.ErrCorrupt)
	}
	_, err = tailbatch.DecodeCursor(data)
	return err != nil
}

// cursorLostUnderHiddenList reports whether, since the last check, the
// cursor object's shipped_through was lost (damaged at rest, by a damaging
// put or a damaging read, or already read damaged by an earlier check) and a listing hid
// objects (a Hide rule fired). A damaged cursor object is rebuilt at start
// from the listing; the contract (FENCING.md: strong read-after-write for
// LIST) does not cover a listing that hides objects, and a rebuild from
// one may only count what it saw. Without a hidden listing the rebuilt
// value must never lower the mark (the check stays).
func (r *run) cursorLostUnderHiddenList() bool {
	if r.curFired == nil {
		r.curFired, r.hideFired = map[int]int{}, map[int]int{}
	}
	if bad, ok := r.damaged[blobtier.CursorKey(0)]; ok && bad != r.curNoted {
		r.curNoted, r.curLost = bad, true
	}
	hidden := false
	for id := range r.w.rules {
		rule := r.ruleOf[id]
		n := r.w.fb.Fired(id)
		switch {
		case rule.Kind == faultbucket.Hide:
			hidden = hidden || n > r.hideFired[id]
			r.hideFired[id] = n
		// A damaging read of the object loses its value to the engine as
		// surely as damage at rest: the owner that read it damaged (at
		// start, or in WriteCursor's read before its swap) rebuilds it
		// from the listing, as the contract asks (issue 12 finding 5).
		case (rule.Op == faultbucket.OpWrite || rule.Op == faultbucket.OpRead) && (rule.Key == "noetl.ehdb.cur.*" || rule.Key == "*") &&
			(rule.Kind == faultbucket.Truncate || rule.Kind == faultbucket.Extend || rule.Kind == faultbucket.Corrupt):
			r.curLost = r.curLost || n > r.curFired[id]
			r.curFired[id] = n
		}
	}
	return r.curLost && hidden
}
