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
	"errors"

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
}
