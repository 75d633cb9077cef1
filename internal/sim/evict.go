package sim

// Local retention (issue 16) in the simulation: two seeds in three run with
// a local budget (one or three 2 KiB segments), so sealed segments durable
// in the bucket leave the disk at the Ship steps, and every read the oracle
// makes of them (the per-step full or incremental read, restores after a
// lost disk, the calm phase) goes through the bucket. The acked-readable
// check covers remote reads unchanged; two allowances keep it honest:
//
//   - A read of an evicted segment fails with localseg.ErrRemoteRead while
//     a bucket fault rule is active (the bucket refused, delayed or damaged
//     the GET): a storage error, never a short page. The check then skips
//     that step; it reads everything again once the faults are gone, and
//     the calm phase heals them all, so an event lost behind the error is
//     still found.
//   - Segment objects are not damaged at rest in eviction seeds: an evicted
//     segment's one copy is its object (self-healing from a second copy is
//     later work), so a flipped byte there is a real loss the engine cannot
//     prevent, only report.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
)

// evictBudget is seed's local retention budget (0: keep everything).
func evictBudget(seed uint64) int64 {
	switch seed % 3 {
	case 1:
		return 2048
	case 2:
		return 3 * 2048
	}
	return 0
}

// remoteReadExcused reports whether err, from the oracle's read of the open
// log, is a failed read of an evicted segment while bucket faults are on.
func (r *run) remoteReadExcused(err error) bool {
	if !errors.Is(err, localseg.ErrRemoteRead) || len(r.w.rules) == 0 {
		return false
	}
	r.stats.Faults["remote-read-refused"]++
	r.logf("  (a read of an evicted segment failed with bucket faults on: %v)", err)
	return true
}

// damagesSegments reports whether damage at rest may hit segment objects.
func (w *world) damagesSegments() bool { return w.evict == 0 }

// noteEvicted counts, after a Ship step, whether the shard has evicted
// segments, and the remote reads of the open log so far (coverage).
func (r *run) noteEvicted() {
	if r.w.log == nil || r.w.evict == 0 {
		return
	}
	st := r.w.log.Store().RemoteStats()
	if st.Evicted > 0 {
		r.stats.Steps["ship:evicted-remote"]++
	}
	if st.Fetches > 0 {
		r.stats.Steps["ship:remote-fetched"]++
	}
	if st.ReadAheads > 0 {
		// The oracle's scans fetched ahead (within the read: the log is
		// NoBackground, so the bucket calls keep one order).
		r.stats.Steps["ship:read-ahead"]++
	}
}

// restoreVariant is the restore operation's store: every other one (by
// count, so seeds stay deterministic) is a lazy restore (issue 16,
// "appendable at once"): only the newest segments within 2 KiB are
// downloaded, the older ones stay in the bucket, and the oracle's read of
// the restored store (opened read-only with the clean bucket) reads them
// through it. Its checks are the full restore's: every acknowledged event,
// byte for byte, and the consumers.
func (r *run) restoreVariant(ctx context.Context) (restored, error) {
	if r.stats.Restores%2 == 1 {
		return r.w.restore(ctx)
	}
	got, lz, err := r.w.restoreLazy(ctx)
	r.noteIndexReads()
	switch {
	case err != nil:
	case lz == nil:
		r.stats.Steps["restore-lazy:nothing-remote"]++
	case lz.FullBecause != "":
		r.stats.Steps["restore-lazy:full"]++
		r.logf("  (lazy restore not possible: %s)", lz.FullBecause)
	default:
		r.stats.Steps["restore-lazy:remote"]++
		r.stats.Steps["restore-lazy:firsts-known"] += lz.FirstsKnown // from the heads' ranged reads
		r.stats.Steps["restore-lazy:firsts-unknown"] += lz.RemoteSegments - lz.FirstsKnown
		r.logf("  (lazy restore: %d segments remote, events below %d read from the bucket)", lz.RemoteSegments, lz.FirstLocalSeq)
	}
	return got, err
}

// restoreLazy is restore with a 2 KiB budget (coldload.Options.Lazy).
func (w *world) restoreLazy(ctx context.Context) (restored, *coldload.LazyReport, error) {
	w.fresh++
	dir := filepath.Join(w.root, fmt.Sprintf("restore-%d", w.fresh))
	b := w.clean()
	rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: b, Dir: dir, AllowEmpty: true, Concurrency: 1, LazyBytes: 2048})
	if err != nil {
		return restored{}, nil, err
	}
	o := bucketlog.Options{Dir: dir, ReadOnly: true, Now: w.now, Logger: quiet, Registerer: simMetrics}
	if rep.Lazy != nil && rep.Lazy.FullBecause == "" {
		o.Bucket = b // the remote segments are read through it
	}
	l, err := bucketlog.Open(ctx, o)
	if err != nil {
		return restored{}, rep.Lazy, fmt.Errorf("open the lazily restored store: %w", err)
	}
	defer l.Close()
	got, err := readLog(l)
	if err == nil {
		err = checkExecutions(l, got) // remote segments located by their index objects (index.go)
	}
	w.lastIndex = l.Store().RemoteStats()
	return got, rep.Lazy, err
}
