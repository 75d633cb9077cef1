package bucketlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
)

// Append appends one event of an execution this shard owns. It returns once
// the event is durable on the local disk (and, in synchronous mode, in the
// bucket — or ErrNotInBucket with the result after the bounded wait).
func (l *Log) Append(ctx context.Context, ev Event) (AppendResult, error) {
	start := time.Now()
	res, err := l.appendOne(ctx, ev)
	l.m.Op(metrics.OpAppend, outcome(err))
	if err == nil || errors.Is(err, ErrNotInBucket) {
		l.m.AppendSeconds.Observe(time.Since(start).Seconds())
	}
	return res, err
}

func (l *Log) appendOne(ctx context.Context, ev Event) (AppendResult, error) {
	if err := l.writable(); err != nil {
		return AppendResult{}, err
	}
	if err := l.stoppedWriting(); err != nil {
		return AppendResult{}, err
	}
	if err := l.routeEvent(ev); err != nil {
		return AppendResult{}, err
	}
	res, err := l.store.Append(ev)
	l.noteErr(err)
	if err != nil {
		return res, err
	}
	if l.ship != nil {
		l.ship.NoteAppended()
		if l.opts.SyncToBucket {
			return res, l.ship.WaitShipped(ctx, res.Seq)
		}
	}
	return res, nil
}

// BatchResult is the outcome of AppendBatch.
type BatchResult struct {
	Appended      int    `json:"appended"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
}

// AppendBatch validates every event (identity, size, ownership) before any
// is written, then appends them as one durable group. A crash in the middle
// of writing a batch may leave an unacknowledged prefix. A storage error
// after a prefix of the batch became durable (a rollover whose successor
// segment cannot be made) comes with that prefix in the result (Appended,
// FirstSequence..LastSequence, Appended below len(evs)): those events are
// acknowledged, the rest were not written.
func (l *Log) AppendBatch(ctx context.Context, evs []Event) (BatchResult, error) {
	start := time.Now()
	res, err := l.appendBatch(ctx, evs)
	l.m.Op(metrics.OpAppend, outcome(err))
	if err == nil || errors.Is(err, ErrNotInBucket) {
		l.m.AppendSeconds.Observe(time.Since(start).Seconds())
	}
	return res, err
}

func (l *Log) appendBatch(ctx context.Context, evs []Event) (BatchResult, error) {
	if err := l.writable(); err != nil {
		return BatchResult{}, err
	}
	if len(evs) == 0 {
		return BatchResult{}, fmt.Errorf("%w: empty batch", localseg.ErrInvalidInput)
	}
	if err := l.stoppedWriting(); err != nil {
		return BatchResult{}, err
	}
	for i, ev := range evs {
		if err := l.routeEvent(ev); err != nil {
			return BatchResult{}, fmt.Errorf("batch event %d: %w", i, err)
		}
	}
	first, last, err := l.store.AppendBatch(evs)
	l.noteErr(err)
	if err != nil {
		if first > 0 && last >= first {
			// A durable prefix (localseg.Store.AppendBatch): reported, so
			// it is not taken for failed and sent again.
			if l.ship != nil {
				l.ship.NoteAppended()
			}
			return BatchResult{Appended: int(last - first + 1), FirstSequence: first, LastSequence: last}, err
		}
		return BatchResult{}, err
	}
	res := BatchResult{Appended: len(evs), FirstSequence: first, LastSequence: last}
	if l.ship != nil {
		l.ship.NoteAppended()
		if l.opts.SyncToBucket {
			return res, l.ship.WaitShipped(ctx, last)
		}
	}
	return res, nil
}

// routeEvent decides ownership once, before any store is touched: an
// invalid event is invalid on every shard, and an event of another shard's
// execution is refused with an *affinity.NotOwnerError naming the owner
// (no byte written, no sequence consumed, so re-routing it is safe).
func (l *Log) routeEvent(ev Event) error {
	if _, err := localseg.ValidateEvent(ev, 0); err != nil {
		return err
	}
	if owner := l.own.OwnerOf(ev.ExecutionID); owner != l.own.Index {
		return &affinity.NotOwnerError{Owner: owner, Shard: l.own.Index, ExecutionID: strings.TrimSpace(ev.ExecutionID)}
	}
	return nil
}

// Scan pages through the owned shard's log after a sequence.
func (l *Log) Scan(ctx context.Context, after uint64, limit int) (Page, error) {
	p, _, err := l.ScanBytes(ctx, after, limit, 0)
	return p, err
}

// ReadResult is a read with the shard it came from and who served it
// (ServedByOwnerResident or ServedByNonOwnerColdLoad).
type ReadResult struct {
	Page     Page
	Shard    int
	ServedBy string
}

// ReadExecution reads an execution's events. The owner serves them from its
// store; an execution of another shard is served by a read-only cold load
// (from the bucket when one is configured), bounded by ctx.
func (l *Log) ReadExecution(ctx context.Context, executionID string, after uint64, limit int) (ReadResult, error) {
	res, _, err := l.ReadExecutionBytes(ctx, executionID, after, limit, 0)
	return res, err
}

// ScanShard scans any shard: the owned one locally, another by a read-only
// cold load bounded by ctx.
func (l *Log) ScanShard(ctx context.Context, shard int, after uint64, limit int) (ReadResult, error) {
	if err := l.checkCtx(ctx); err != nil {
		return ReadResult{}, err
	}
	if shard == l.own.Index || l.opts.ReadOnly {
		p, err := l.Scan(ctx, after, limit)
		return ReadResult{Page: p, Shard: l.own.Index, ServedBy: ServedByOwnerResident}, err
	}
	var res ReadResult
	err := fmt.Errorf("%w: shard %d is not in a pool of %d", ErrInvalidInput, shard, l.own.Count)
	if shard >= 0 && shard < l.own.Count {
		res, err = l.coldRead(ctx, shard, func(r affinity.Reader) (Page, error) { return r.Scan(after, limit) })
	}
	l.m.Op(metrics.OpScan, outcome(err))
	return res, err
}

// coldRead serves one read of a shard this one does not own from a
// read-only view of it, opened and closed for the read.
func (l *Log) coldRead(ctx context.Context, shard int, op func(affinity.Reader) (Page, error)) (ReadResult, error) {
	r, err := l.cold(ctx, shard)
	if err != nil {
		return ReadResult{}, err
	}
	p, err := op(r)
	if cerr := r.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close cold load of shard %d: %w", shard, cerr)
	}
	if err != nil {
		return ReadResult{}, err
	}
	return ReadResult{Page: p, Shard: shard, ServedBy: ServedByNonOwnerColdLoad}, nil
}

// Pull returns up to limit events after consumer's cursor, creating the
// consumer on its first pull of a non-empty shard.
func (l *Log) Pull(ctx context.Context, consumer string, limit int) (PullResult, error) {
	if err := l.writableCtx(ctx); err != nil {
		return PullResult{}, err
	}
	if err := l.pullRefused(consumer); err != nil {
		return PullResult{}, err
	}
	res, err := l.store.Pull(consumer, limit)
	l.noteErr(err)
	l.m.Op(metrics.OpPull, outcome(err))
	return res, err
}

// pullRefused is why a pull is refused after a second writer: a pull of
// an existing consumer writes nothing and is still served; one that would
// create the consumer is refused.
func (l *Log) pullRefused(consumer string) error {
	err := l.stoppedWriting()
	if err == nil {
		return nil
	}
	snap, serr := l.store.Snapshot()
	if serr != nil {
		return serr
	}
	if _, ok := snap.Consumers[consumer]; ok {
		return nil
	}
	l.m.Op(metrics.OpPull, outcome(err))
	return err
}

// Ack moves consumer's cursor forward to seq.
func (l *Log) Ack(ctx context.Context, consumer string, seq uint64) (uint64, error) {
	if err := l.writableCtx(ctx); err != nil {
		return 0, err
	}
	if err := l.stoppedWriting(); err != nil {
		l.m.Op(metrics.OpAck, outcome(err))
		return 0, err
	}
	acked, err := l.store.Ack(consumer, seq)
	l.noteErr(err)
	l.m.Op(metrics.OpAck, outcome(err))
	return acked, err
}

// DeleteConsumer removes a consumer, so it no longer holds GC back.
func (l *Log) DeleteConsumer(ctx context.Context, consumer string) error {
	if err := l.writableCtx(ctx); err != nil {
		return err
	}
	if err := l.stoppedWriting(); err != nil {
		l.m.Op(metrics.OpConsumerDelete, outcome(err))
		return err
	}
	err := l.store.DeleteConsumer(consumer)
	l.noteErr(err)
	l.m.Op(metrics.OpConsumerDelete, outcome(err))
	return err
}

// Health reports readiness: recovered, hydrated, not poisoned, and (with a
// bucket) shipping. The reason says what is wrong.
func (l *Log) Health() (ready bool, reason string) {
	switch {
	case l.closed.Load():
		return false, "closed"
	case l.poisoned.Load(), l.store.Poisoned() != nil:
		return false, "store poisoned by a write or fsync error; restart to recover"
	}
	if l.ship != nil {
		if err := l.ship.Health(); err != nil {
			return false, err.Error()
		}
	}
	return true, ""
}

// ShippedThrough is the highest sequence the bucket holds contiguously as
// far as this process knows (0 without a bucket). In asynchronous mode an
// event above it would be lost with the local disk.
func (l *Log) ShippedThrough() uint64 {
	if l.ship == nil {
		return 0
	}
	return l.ship.ShippedThrough()
}
