package shipper

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// shipTail is one tail pass: tailbatch's own loop (Prepare, Upload, then
// Commit or Fail per batch, then the cursor object), with the shipper's
// books kept in its hooks.
func (s *Shipper) shipTail(ctx context.Context) error { return s.shipTailPass(ctx, passExplicit) }

// A pass is one of three kinds, which differ only in when they leave the
// cursor object to a later pass.
type passKind int

const (
	passExplicit passKind = iota // Ship, Close's final shipment, a one-shot sync wait: always writes it
	passTick                     // the periodic tick: at most once per cursor interval
	passSync                     // kicked by a synchronous append: at most once per tick interval
)

// CursorTicks is the default cursor interval in ticks: at the default
// 15 s tick the cursor object is written at most once a minute.
const CursorTicks = 4

func (s *Shipper) cursorInterval() time.Duration {
	if s.o.CursorInterval > 0 {
		return s.o.CursorInterval
	}
	return CursorTicks * s.o.TailInterval
}

// shipTailPass is shipTail. Synchronous appenders are woken as each batch
// commits (its put done, the fence HEAD passed, the shipped position
// covering it), not after the cursor object: restore appends every tail
// object beyond the cursor (docs/FORMAT.md §9.1 step 6), so the cursor is
// no part of an acknowledgement. A pass a synchronous append kicked
// (forSync) also leaves the cursor object to the next periodic tick while
// one was written within the tick interval, so the next group's put does
// not wait behind its three requests. The periodic tick writes it for a
// move of shipped_through alone at most once per cursor interval (four
// ticks by default), and at once when the consumers changed: the position
// is no part of what a restore needs for the events (it appends every tail
// object beyond it), and on an active shard the object's GET and
// compare-and-swap were half the requests of every tick. So the object's
// shipped_through lags the tail by at most one cursor interval; Ship and
// Close's final shipment always write it.
func (s *Shipper) shipTailPass(ctx context.Context, kind passKind) error {
	if err := s.stopped(); err != nil {
		return err
	}
	// deferCursor (a sync pass) holds the whole object back, holdPosition
	// (a periodic tick) only a move of shipped_through: a change of the
	// consumers is still written at the next tick, since a trailing Ack or
	// delete rides in no tail object.
	deferCursor, holdPosition := false, false
	if kind != passExplicit {
		s.mu.Lock()
		since, written := s.o.Now().Sub(s.cursorAt), !s.cursorAt.IsZero()
		s.mu.Unlock()
		deferCursor = kind == passSync && written && since < s.o.TailInterval
		holdPosition = kind == passTick && written && since < s.cursorInterval()
		// Never hold while durable segments reach past the object's
		// position: it is a restore's witness of the watermark, which GC
		// may move up to them (gc.go keeps the watermark at or below it).
		if durable, _ := s.contiguous(); durable > s.repl.CursorShipped() {
			holdPosition = false
		}
	}
	// A held cursor object is rebuilt first once its segments are put
	// again; a failed rebuild does not keep the tail from shipping.
	herr := s.releaseCursor(ctx)
	before := s.repl.ShippedThrough()
	started, tipAtStart := s.o.Now(), s.store.Tip()
	var committedMax uint64
	var conflictKey string
	var occupied tailbatch.Batch // the batch a damaged older object's key refused
	// certifyTo is what the last fence check vouches for; it is certified
	// only once its batch commits (the check runs beside the read-back, so
	// a batch that then fails certifies nothing).
	var certifyTo uint64
	hooks := tailbatch.Hooks{
		// The shipped position may sit below the reclaim base: GC reclaims
		// only segments durable in the bucket, so everything through the
		// contiguous durable watermark is there. Move up to it and prepare
		// again, rather than fail every pass.
		Resync: func() uint64 { seq, _ := s.contiguous(); return seq },
		Committed: func(bt tailbatch.Batch) {
			s.mu.Lock()
			s.pendingTails[bt.Key] = &pendingTail{last: bt.LastSeq}
			s.mu.Unlock()
			committedMax = bt.LastSeq
			s.m.TailBatches.Inc()
			s.m.TailRecords.Add(float64(bt.Records()))
			s.m.TailBytes.Add(float64(bt.Len()))
			if s.fencingOn() {
				s.certify(certifyTo)
			}
			s.notifyShipped() // wake the synchronous appenders it covers
		},
		Failed: func(bt tailbatch.Batch, err error) {
			s.m.TailReplicationFailed.Inc()
			if errors.Is(err, blobtier.ErrConflict) {
				conflictKey = bt.Key
			}
			if errors.Is(err, errGarbageOccupant) {
				occupied = bt
			}
		},
		AfterUpload: func(bt tailbatch.Batch) error {
			if !s.fencingOn() {
				return nil
			}
			before := s.repl.ShippedThrough()
			if err := s.checkFence(ctx); err != nil {
				return err
			}
			certifyTo = max(before, bt.LastSeq)
			return nil
		},
		CursorOnlyAfterSuccess: true,
		HoldCursor:             func() bool { return deferCursor || s.cursorHeld() },
		HoldPosition:           func() bool { return holdPosition },
	}
	if s.fencingOn() {
		// The 412 rule with the epoch: a newer occupant fences us, an older
		// one is a stale writer's garbage, ours with other bytes a second
		// writer.
		hooks.Conflict = func(bt tailbatch.Batch, err error) error {
			data, rerr := s.store.ReadRange(bt.Segment, bt.Start, bt.End-bt.Start)
			if rerr != nil {
				return errors.Join(err, rerr)
			}
			if cerr := s.conflict(ctx, bt.Key, data, err); cerr != nil {
				return cerr
			}
			// An older epoch's copy of these bytes the lineage keeps: it
			// counts only if it reads back intact.
			if _, _, gerr := s.b.Get(ctx, bt.Key); gerr != nil {
				return fmt.Errorf("%w: %s reads back: %v", errGarbageOccupant, bt.Key, gerr)
			}
			return nil
		}
	}
	res, failure := s.repl.ReplicateWith(ctx, s.store, s.b, hooks)
	if conflictKey != "" {
		return s.secondWriter(conflictKey, failure)
	}
	if errors.Is(failure, errGarbageOccupant) {
		if err := s.shipAround(ctx); err == nil {
			failure = nil
		} else if src, ok := recutAround(s.store, occupied); ok {
			res, failure = s.repl.ReplicateWith(ctx, src, s.b, hooks) // recut.go
			if conflictKey != "" {
				return s.secondWriter(conflictKey, failure)
			}
			if failure != nil {
				failure = errors.Join(failure, err)
			}
		} else {
			failure = errors.Join(failure, err)
		}
	}
	if err := s.stopped(); err != nil {
		return err // fenced by the check after the put
	}
	if failure == nil {
		failure = s.certifyShipped(ctx)
	}
	if s.repl.ShippedThrough() > before {
		s.watch.shipped(s.o.Now())
		s.shippedSince(started, tipAtStart)
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
	if res.CursorWritten || res.CursorFailed {
		// The pass's start, not now: the interval counts from the write's
		// issue, and a reader that saw the object land cannot see a later
		// time recorded for it.
		s.mu.Lock()
		s.cursorAt = started
		s.mu.Unlock()
	}
	if res.CursorFailed {
		s.m.CursorWriteFailed.Inc()
	}
	if res.CursorWritten && res.Cursor.Repaired {
		s.log.Error("the cursor object was damaged; rewritten with the owner's state", "key", blobtier.CursorKey(s.shard), "shipped_through", res.Cursor.ShippedThrough)
	}
	if s.cursorHeld() {
		// This pass may have shipped the held tails' events again.
		herr = s.releaseCursor(ctx)
	}
	failure = errors.Join(herr, failure)
	s.noteTail(failure)
	return failure
}

func (s *Shipper) noteAppended() {
	s.unshippedSince.CompareAndSwap(0, s.o.Now().UnixNano())
}

// waitShipped blocks a synchronous append until the bucket holds seq, or
// returns ErrNotInBucket after SyncWait (the event stays durable locally and
// ships later).
func (s *Shipper) waitShipped(ctx context.Context, seq uint64) error {
	if !s.tailOn {
		return fmt.Errorf("%w: synchronous mode needs tail replication", ErrUsage)
	}
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	timer := time.NewTimer(s.o.SyncWait)
	defer timer.Stop()
	if !s.background {
		return s.shipUntil(ctx, seq, timer.C)
	}
	for {
		s.mu.Lock()
		ch, stop, closing := s.shippedCh, s.stopErr, s.closing
		s.mu.Unlock()
		if s.confirmed() >= seq {
			return nil
		}
		if errors.Is(stop, ErrFenced) {
			return s.fencedVerdict(ctx, seq, stop)
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
			return fmt.Errorf("%w: sequence %d was not confirmed within %s", ErrNotInBucket, seq, s.o.SyncWait)
		case <-ctx.Done():
			return fmt.Errorf("%w: sequence %d: %v", ErrNotInBucket, seq, ctx.Err())
		}
	}
}

// shipUntil ships the tail itself, retrying with backoff, until the bucket
// holds seq or the wait ends: a synchronous append on a log opened without
// background work (one-shot commands).
func (s *Shipper) shipUntil(ctx context.Context, seq uint64, deadline <-chan time.Time) error {
	backoff := 20 * time.Millisecond
	for {
		s.mu.Lock()
		ch, closing := s.shippedCh, s.closing
		s.mu.Unlock()
		if closing {
			return errClosedWaiting(seq)
		}
		err := s.shipTail(ctx)
		if s.confirmed() >= seq {
			return nil
		}
		if stop := s.stopped(); errors.Is(stop, ErrFenced) {
			return s.fencedVerdict(ctx, seq, stop)
		} else if stop != nil {
			return fmt.Errorf("%w (sequence %d): %v", ErrNotInBucket, seq, stop)
		}
		select {
		case <-ch: // shipped moved, or Close released the waiters
		case <-deadline:
			return fmt.Errorf("%w: sequence %d was not confirmed within %s: %v", ErrNotInBucket, seq, s.o.SyncWait, err)
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
func (s *Shipper) stopWaiters() {
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
func (s *Shipper) final(ctx context.Context) error {
	if s.stopped() != nil {
		return nil
	}
	s.maint.Lock()
	_, uerr := s.uploadSealed(ctx)
	s.maint.Unlock()
	terr := s.shipTail(ctx)
	return errors.Join(uerr, terr)
}

func (s *Shipper) updateGauges() {
	m := s.m
	snap, err := s.store.Snapshot()
	if err != nil {
		return
	}
	now := s.o.Now()
	if n := len(snap.Segments); n > 0 && snap.Segments[n-1].Size > 0 && !snap.ActiveOpenedAt.IsZero() {
		m.OldestUnsealedAge.Set(now.Sub(snap.ActiveOpenedAt).Seconds())
	} else {
		m.OldestUnsealedAge.Set(0)
	}
	m.OldestUnreplicatedAge.Set(s.oldestUnshippedAge(now).Seconds())
	m.UnshippedBytes.Set(float64(s.unshippedBytes()))
}
