package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/bucketlog/bucketlog/localseg"
)

// event is what the simulation appended; the payload is unique per append,
// so a record found anywhere names the append it came from.
type event struct {
	exec, txn, payload string
}

func (e event) String() string { return e.payload }

// failure is an append reported failed (not ErrNotInBucket).
type failure struct {
	step int
	ev   event
	// unknown: a restart that keeps the page cache came since, so the
	// event may have been recovered from data that was never reported
	// durable (a failed fsync still leaves it readable).
	unknown bool
}

// model is what the oracle knows: the history served so far, what was
// acknowledged, and what the engine said the bucket holds.
type model struct {
	hist      map[uint64]event // sequence → event, in the current history
	bySeqAck  map[uint64]bool  // acknowledged: durable on the disk that lives
	sent      map[string]event // payload → event, every append made
	failed    map[string]*failure
	shipped   uint64 // highest shipped_through the engine reported
	syncAcked uint64 // highest sequence a synchronous append confirmed
	reclaimed uint64 // highest reclaimed-through sequence the engine reported (base-1)
	wm        uint64 // highest watermark seq read from the bucket
	durable   uint64 // highest rw durable_seq read from the bucket (since its last damage)
	cur       uint64 // highest cursor shipped_through read from the bucket

	live    map[string]bool // consumers the model knows alive
	deleted map[string]bool // deleted consumers (names never reused)
	delShip map[string]bool // deleted, and a whole Ship pass succeeded after
	nextC   int
	nextEv  int
	retry   *retrier // retries of earlier transaction ids (dedup.go)
	// zombie checks every record served against what a fenced owner wrote
	// (writers.go); nil: no second writer.
	zombie func(localseg.Record) *violation
}

func newModel() *model {
	return &model{
		hist: map[uint64]event{}, bySeqAck: map[uint64]bool{}, sent: map[string]event{},
		failed: map[string]*failure{}, live: map[string]bool{}, deleted: map[string]bool{}, delShip: map[string]bool{},
	}
}

// floor is the highest sequence the bucket must hold: reported shipped or
// confirmed synchronously.
func (m *model) floor() uint64 { return max(m.shipped, m.syncAcked) }

// violation is a failed oracle check.
type violation struct {
	check string
	msg   string
}

func (v *violation) Error() string { return v.check + ": " + v.msg }

func fail(check, format string, args ...any) *violation {
	return &violation{check, fmt.Sprintf(format, args...)}
}

// serve checks one record against the history: a sequence is never served
// with two different events, and a record is always an event the
// simulation appended. A failed append is never served (strict), unless a
// restart since may have recovered it from data never reported durable.
func (m *model) serve(r localseg.Record, strict bool) *violation {
	if m.zombie != nil {
		if v := m.zombie(r); v != nil {
			return v
		}
	}
	got := event{r.ExecutionID, r.TransactionID, r.Payload}
	if had, ok := m.hist[r.Seq]; ok {
		if had != got {
			return fail("one-history", "sequence %d served as %s, earlier as %s", r.Seq, got, had)
		}
		return nil
	}
	sent, ok := m.sent[r.Payload]
	if !ok || sent != got {
		return fail("one-history", "sequence %d holds %q, which was never appended", r.Seq, r.Payload)
	}
	if f := m.failed[r.Payload]; f != nil && strict && !f.unknown {
		return fail("failed-append-durable", "sequence %d: %s was reported failed at step %d, and is served as durable", r.Seq, r.Payload, f.step)
	}
	for s, e := range m.hist {
		if e.payload == r.Payload && s != r.Seq {
			return fail("one-history", "%s served at sequence %d and at %d", r.Payload, r.Seq, s)
		}
	}
	m.hist[r.Seq] = got
	return nil
}

// checkLocal checks what the open Log serves: every acknowledged event at
// or above the base is there, and nothing contradicts the history.
func (m *model) checkLocal(r restored, strict bool) *violation { return m.checkLocalFrom(r, 0, strict) }

// checkLocalFrom is checkLocal of a read that starts after sequence from
// (every sequence up to it was checked on this Log before).
func (m *model) checkLocalFrom(r restored, from uint64, strict bool) *violation {
	present := make(map[uint64]bool, len(r.records))
	for _, rec := range r.records {
		if v := m.serve(rec, strict); v != nil {
			return v
		}
		present[rec.Seq] = true
	}
	m.reclaimed = max(m.reclaimed, r.base-1)
	for _, s := range slices.Sorted(maps.Keys(m.bySeqAck)) {
		if s >= r.base && s > from && !present[s] {
			return fail("acked-readable", "acknowledged sequence %d (%s) is not served (base %d, tip %d)", s, m.hist[s], r.base, r.tip)
		}
	}
	for name := range r.consumers {
		if m.deleted[name] {
			return fail("deleted-consumer", "deleted consumer %q is back (cursor %d)", name, r.consumers[name])
		}
	}
	return nil
}

// checkRestore checks a restore from the bucket alone: every event the
// bucket was reported to hold is there byte-exact, nothing was cut below
// what the engine ever reclaimed, cursors are not ahead of the data, and a
// consumer whose deletion shipped stays deleted.
func (m *model) checkRestore(r restored, strict bool) *violation {
	present := make(map[uint64]bool, len(r.records))
	for _, rec := range r.records {
		if v := m.serve(rec, strict); v != nil {
			return fail("restore-"+v.check, "%s", v.msg)
		}
		present[rec.Seq] = true
	}
	if r.base-1 > max(m.reclaimed, m.wm) {
		return fail("restore-base", "the restore starts at %d, but the engine never reclaimed beyond %d (watermark %d)", r.base, m.reclaimed, m.wm)
	}
	for s := r.base; s <= m.floor(); s++ {
		if !present[s] {
			return fail("restore-missing", "sequence %d is missing from the restore (base %d, tip %d; shipped %d, sync-confirmed %d)", s, r.base, r.tip, m.shipped, m.syncAcked)
		}
	}
	for name, c := range r.consumers {
		if c > r.tip {
			return fail("restore-cursor", "consumer %q at %d, past the restored tip %d", name, c, r.tip)
		}
		if m.delShip[name] {
			return fail("deleted-consumer", "consumer %q, deleted and shipped, is back after a restore (cursor %d)", name, c)
		}
	}
	return nil
}

// forgetAbove drops the history above tip: a disk that was lost (or
// replaced) gives the async loss window's sequences to new events.
func (m *model) forgetAbove(tip uint64) {
	for s := range m.hist {
		if s > tip {
			delete(m.hist, s)
			delete(m.bySeqAck, s)
		}
	}
}

// newDisk is a disk from the bucket (hydrated) or an older copy: what was
// acknowledged is only what it serves.
func (m *model) newDisk(r restored) {
	m.forgetAbove(r.tip)
	for s := range m.bySeqAck {
		if s < r.base {
			delete(m.bySeqAck, s)
		}
	}
	for _, f := range m.failed {
		f.unknown = true
	}
	// Consumers whose deletion never shipped may come back with the old
	// disk's or the bucket's state; only shipped deletions must hold.
	for name := range m.deleted {
		if !m.delShip[name] {
			delete(m.deleted, name)
		}
	}
}
