package shipper

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// DefaultBucketWarnInterval is how often a bucket that keeps failing is
// logged again (one WARN with the count of failures since the last line).
const DefaultBucketWarnInterval = time.Minute

// ErrUnshippedBound: the bucket has been failing for longer than
// Options.MaxUnshippedAge and the oldest unshipped event is older than
// that; with Options.RefuseWhenUnshipped appends are refused (storage
// class, HTTP 503) rather than widen the loss window of a lost disk.
var ErrUnshippedBound = errors.New("bucketlog: the bucket has been failing longer than the unshipped-age bound")

// bucketWatch follows the bucket's failure streaks for the log and for
// Status: a streak begins with the first failed shipment (one WARN line),
// is summarised every warn interval while it lasts (one WARN with the
// failures since the last line), and ends when both shipping paths succeed
// again (one INFO line). It is safe for concurrent use.
type bucketWatch struct {
	log      *slog.Logger
	interval time.Duration

	mu           sync.Mutex
	failingSince time.Time // zero: not failing
	lastErr      string    // redacted
	lastErrAt    time.Time
	lastShipAt   time.Time // the shipped position last moved
	streak       int       // failures in this streak
	sinceLine    int       // failures since the last WARN line
	lineAt       time.Time // the last WARN line of this streak
}

// note records one shipment outcome: err of the path that just ran, and
// failing, whether any shipping path's latest outcome is still a failure.
func (w *bucketWatch) note(now time.Time, err error, failing bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.lastErr, w.lastErrAt = blobtier.RedactText(err.Error()), now
		w.streak++
		w.sinceLine++
	}
	switch {
	case failing && w.failingSince.IsZero():
		w.failingSince, w.lineAt, w.sinceLine = now, now, 0
		w.log.Warn("the bucket is failing: events stay durable on the local disk and ship when it answers; retrying", "err", w.lastErr)
	case failing && now.Sub(w.lineAt) >= w.interval:
		w.log.Warn("the bucket is still failing", "failures", w.sinceLine, "streak_failures", w.streak,
			"failing_for", now.Sub(w.failingSince).Round(time.Millisecond).String(), "err", w.lastErr)
		w.lineAt, w.sinceLine = now, 0
	case !failing && !w.failingSince.IsZero():
		w.log.Info("the bucket recovered", "failures", w.streak, "failed_for", now.Sub(w.failingSince).Round(time.Millisecond).String())
		w.failingSince, w.streak, w.sinceLine = time.Time{}, 0, 0
	}
}

func (w *bucketWatch) shipped(now time.Time) {
	w.mu.Lock()
	w.lastShipAt = now
	w.mu.Unlock()
}

func (w *bucketWatch) state() (failingSince time.Time, lastErr string, lastErrAt, lastShipAt time.Time, streak int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failingSince, w.lastErr, w.lastErrAt, w.lastShipAt, w.streak
}

// failing reports whether a shipping path's latest outcome is a failure
// (s.mu held).
func (s *Shipper) failingLocked() bool { return s.uploadErr != nil || s.tailErr != nil }

// overBound is ErrUnshippedBound when the bound is set, the bucket has
// been failing for longer than it and the oldest unshipped event is older
// than it; else nil.
func (s *Shipper) overBound() error {
	d := s.o.MaxUnshippedAge
	if d <= 0 {
		return nil
	}
	since, _, _, _, _ := s.watch.state()
	oldest := s.unshippedSince.Load()
	if since.IsZero() || oldest == 0 {
		return nil
	}
	now := s.o.Now()
	if age := now.Sub(time.Unix(0, oldest)); now.Sub(since) > d && age > d {
		return fmt.Errorf("%w (%s): the oldest unshipped event is %s old, events %d..%d are on the local disk only",
			ErrUnshippedBound, d, age.Round(time.Millisecond), s.repl.ShippedThrough()+1, s.store.Tip())
	}
	return nil
}

// Ready is nil while the shard takes appends and serves every retained
// event: not stopped by a second writer, no local sealed segment corrupt
// with no verified bucket copy to replace it (heal.go: reads of its events
// fail, appends go on) and, with MaxUnshippedAge, within the unshipped
// bound. A failing bucket alone does not make it unready (Health and
// Status report it).
func (s *Shipper) Ready() error {
	if err := s.stopped(); err != nil {
		return err
	}
	if err := s.unhealed(); err != nil {
		return err
	}
	return s.overBound()
}

// Refusing is why an append is refused before it is written: the
// second-writer stop, or (with RefuseWhenUnshipped) the unshipped bound.
// A nil Shipper (no bucket) refuses nothing.
func (s *Shipper) Refusing() error {
	if s == nil {
		return nil
	}
	if err := s.stopped(); err != nil {
		return err
	}
	if s.o.RefuseWhenUnshipped {
		return s.overBound()
	}
	return nil
}

// shippedSince narrows the age of the oldest unshipped event after a tail
// pass that began at started with the tip at tipAtStart: once the bucket
// holds everything through tipAtStart, every event still unshipped was
// appended after started (notifyShipped clears it when nothing is left).
func (s *Shipper) shippedSince(started time.Time, tipAtStart uint64) {
	if s.repl.ShippedThrough() < tipAtStart {
		return
	}
	for {
		old := s.unshippedSince.Load()
		if old == 0 || old >= started.UnixNano() || s.unshippedSince.CompareAndSwap(old, started.UnixNano()) {
			return
		}
	}
}

// oldestUnshippedAge bounds from above the age of the oldest event not in
// the bucket (0 when the bucket holds the tip).
func (s *Shipper) oldestUnshippedAge(now time.Time) time.Duration {
	since := s.unshippedSince.Load()
	if since == 0 || s.repl.ShippedThrough() >= s.store.Tip() {
		return 0
	}
	return max(0, now.Sub(time.Unix(0, since)))
}

// unshippedBytes is the size of the durable local frames after the
// shipped position: what a lost disk would lose (consumer frames between
// them included). It is 0 when the bucket holds the tip.
func (s *Shipper) unshippedBytes() int64 {
	shipped := s.repl.ShippedThrough()
	snap, err := s.store.Snapshot()
	if err != nil || snap.Tip <= shipped {
		return 0
	}
	ext, ok, err := s.store.TailExtent(shipped, math.MaxInt64)
	if err != nil || !ok {
		return 0
	}
	n := ext.End - ext.Start
	for _, seg := range snap.Segments {
		if seg.ID > ext.Segment {
			n += seg.Size
		}
	}
	return n
}
