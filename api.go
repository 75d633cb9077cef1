package bucketlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
)

// Append appends one event of an execution this shard owns. It returns once
// the event is durable on the local disk (and, in synchronous mode, in the
// bucket — or ErrNotInBucket with the result after the bounded wait).
func (l *Log) Append(ctx context.Context, ev localseg.Event) (localseg.AppendResult, error) {
	start := time.Now()
	res, err := l.appendOne(ctx, ev)
	l.m.Op(metrics.OpAppend, outcome(err))
	if err == nil || errors.Is(err, ErrNotInBucket) {
		l.m.AppendSeconds.Observe(time.Since(start).Seconds())
	}
	return res, err
}

func (l *Log) appendOne(ctx context.Context, ev localseg.Event) (localseg.AppendResult, error) {
	if err := l.writable(); err != nil {
		return localseg.AppendResult{}, err
	}
	if err := l.stoppedWriting(); err != nil {
		return localseg.AppendResult{}, err
	}
	res, err := l.route.Append(ev)
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
// of writing a batch may leave an unacknowledged prefix.
func (l *Log) AppendBatch(ctx context.Context, evs []localseg.Event) (BatchResult, error) {
	start := time.Now()
	res, err := l.appendBatch(ctx, evs)
	l.m.Op(metrics.OpAppend, outcome(err))
	if err == nil || errors.Is(err, ErrNotInBucket) {
		l.m.AppendSeconds.Observe(time.Since(start).Seconds())
	}
	return res, err
}

func (l *Log) appendBatch(ctx context.Context, evs []localseg.Event) (BatchResult, error) {
	if err := l.writable(); err != nil {
		return BatchResult{}, err
	}
	if len(evs) == 0 {
		return BatchResult{}, fmt.Errorf("%w: empty batch", localseg.ErrInvalidInput)
	}
	if err := l.stoppedWriting(); err != nil {
		return BatchResult{}, err
	}
	first, last, err := l.route.AppendBatch(evs)
	l.noteErr(err)
	if err != nil {
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

// Scan pages through the owned shard's log after a sequence.
func (l *Log) Scan(after uint64, limit int) (localseg.Page, error) {
	if err := l.check(); err != nil {
		return localseg.Page{}, err
	}
	p, err := l.store.Scan(after, limit)
	l.m.Op(metrics.OpScan, outcome(err))
	return p, err
}

// ReadResult is a read with who served it.
type ReadResult = affinity.ReadResult

// ReadExecution reads an execution's events. The owner serves them from its
// store; an execution of another shard is served by a read-only cold load
// (from the bucket when one is configured).
func (l *Log) ReadExecution(executionID string, after uint64, limit int) (ReadResult, error) {
	if err := l.check(); err != nil {
		return ReadResult{}, err
	}
	var res ReadResult
	var err error
	if l.route != nil {
		res, err = l.route.Read(executionID, after, limit)
	} else {
		var p localseg.Page
		p, err = l.store.ReadExecution(executionID, after, limit)
		res = ReadResult{Page: p, Shard: l.own.Index, ServedBy: affinity.ServedByOwnerResident}
	}
	l.m.Op(metrics.OpRead, outcome(err))
	return res, err
}

// ScanShard scans any shard: the owned one locally, another by a read-only
// cold load.
func (l *Log) ScanShard(shard int, after uint64, limit int) (ReadResult, error) {
	if err := l.check(); err != nil {
		return ReadResult{}, err
	}
	if shard == l.own.Index || l.route == nil {
		p, err := l.Scan(after, limit)
		return ReadResult{Page: p, Shard: l.own.Index, ServedBy: affinity.ServedByOwnerResident}, err
	}
	res, err := l.route.ScanShard(shard, after, limit)
	l.m.Op(metrics.OpScan, outcome(err))
	return res, err
}

// Pull returns up to limit events after consumer's cursor, creating the
// consumer on its first pull of a non-empty shard.
func (l *Log) Pull(consumer string, limit int) (localseg.PullResult, error) {
	if err := l.writable(); err != nil {
		return localseg.PullResult{}, err
	}
	if err := l.stoppedWriting(); err != nil {
		// A pull of an existing consumer writes nothing and is still
		// served; one that would create the consumer is refused.
		snap, serr := l.store.Snapshot()
		if serr != nil {
			return localseg.PullResult{}, serr
		}
		if _, ok := snap.Consumers[consumer]; !ok {
			l.m.Op(metrics.OpPull, outcome(err))
			return localseg.PullResult{}, err
		}
	}
	res, err := l.route.Pull(l.own.Index, consumer, limit)
	l.noteErr(err)
	l.m.Op(metrics.OpPull, outcome(err))
	return res, err
}

// Ack moves consumer's cursor forward to seq.
func (l *Log) Ack(consumer string, seq uint64) (uint64, error) {
	if err := l.writable(); err != nil {
		return 0, err
	}
	if err := l.stoppedWriting(); err != nil {
		l.m.Op(metrics.OpAck, outcome(err))
		return 0, err
	}
	acked, err := l.route.Ack(l.own.Index, consumer, seq)
	l.noteErr(err)
	l.m.Op(metrics.OpAck, outcome(err))
	return acked, err
}

// DeleteConsumer removes a consumer, so it no longer holds GC back.
func (l *Log) DeleteConsumer(consumer string) error {
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.stoppedWriting(); err != nil {
		l.m.Op(metrics.OpConsumerDelete, outcome(err))
		return err
	}
	err := l.route.DeleteConsumer(l.own.Index, consumer)
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
