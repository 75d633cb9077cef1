package bucketlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
	"github.com/bucketlog/bucketlog/shipper"
)

// Append appends one event of an execution this shard owns. It returns once
// the event is durable on the local disk (and, in synchronous mode, in the
// bucket — or ErrNotInBucket with the result after the bounded wait).
func (l *Log) Append(ctx context.Context, ev Event) (AppendResult, error) {
	start := time.Now()
	res, err := l.appendOne(ctx, ev)
	l.countAppend(start, err)
	return res, err
}

// countAppend counts an append and, once it is durable locally, its
// latency.
func (l *Log) countAppend(start time.Time, err error) {
	l.m.Op(metrics.OpAppend, outcome(err))
	if err == nil || errors.Is(err, ErrNotInBucket) {
		l.m.AppendSeconds.Observe(time.Since(start).Seconds())
	}
}

func (l *Log) appendOne(ctx context.Context, ev Event) (AppendResult, error) {
	if err := l.writable(); err != nil {
		return AppendResult{}, err
	}
	if err := l.ship.AppendGate(ctx); err != nil {
		return AppendResult{}, err
	}
	if err := l.own.Route(ev); err != nil {
		return AppendResult{}, err
	}
	res, err := l.store.Append(ev)
	l.noteErr(err)
	if err != nil {
		return res, err
	}
	return res, l.appended(ctx, res.Seq, true)
}

// appended tells the shipper of appends through seq and, with sync in
// synchronous mode, waits until the bucket holds them.
func (l *Log) appended(ctx context.Context, seq uint64, sync bool) error {
	return l.ship.Appended(ctx, seq, sync && l.opts.SyncToBucket)
}

// BatchResult is the outcome of AppendBatch.
type BatchResult struct {
	Appended      int    `json:"appended"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
	// Duplicates are the events not written: their transaction id was in the log.
	Duplicates []localseg.Duplicate `json:"duplicates,omitempty"`
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
	l.countAppend(start, err)
	return res, err
}

func (l *Log) appendBatch(ctx context.Context, evs []Event) (BatchResult, error) {
	if err := l.writable(); err != nil {
		return BatchResult{}, err
	}
	if len(evs) == 0 {
		return BatchResult{}, fmt.Errorf("%w: empty batch", localseg.ErrInvalidInput)
	}
	if err := l.ship.AppendGate(ctx); err != nil {
		return BatchResult{}, err
	}
	for i, ev := range evs {
		if err := l.own.Route(ev); err != nil {
			return BatchResult{}, fmt.Errorf("batch event %d: %w", i, err)
		}
	}
	r, err := l.store.AppendEvents(evs)
	first, last := r.First, r.Last
	l.noteErr(err)
	if err != nil {
		if first > 0 && last >= first {
			// A durable prefix (localseg.Store.AppendBatch): reported, so
			// it is not taken for failed and sent again.
			_ = l.appended(ctx, last, false)
			return BatchResult{Appended: int(last - first + 1), FirstSequence: first, LastSequence: last, Duplicates: r.Duplicates}, err
		}
		return BatchResult{}, err
	}
	res := BatchResult{Appended: len(evs) - len(r.Duplicates), FirstSequence: first, LastSequence: last, Duplicates: r.Duplicates}
	return res, l.appended(ctx, r.MaxSeq(), true)
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
	p, err := l.cold.Read(ctx, shard, op)
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

// pullRefused is why a pull is refused after a second writer
// (shipper.RefusesPull), counted.
func (l *Log) pullRefused(consumer string) error {
	err := l.ship.RefusesPull(consumer)
	if err != nil {
		l.m.Op(metrics.OpPull, outcome(err))
	}
	return err
}

// Ack moves consumer's cursor forward to seq.
func (l *Log) Ack(ctx context.Context, consumer string, seq uint64) (acked uint64, err error) {
	err = l.write(ctx, metrics.OpAck, func() (err error) {
		acked, err = l.store.Ack(consumer, seq)
		return err
	})
	return acked, err
}

// DeleteConsumer removes a consumer, so it no longer holds GC back.
func (l *Log) DeleteConsumer(ctx context.Context, consumer string) error {
	return l.write(ctx, metrics.OpConsumerDelete, func() error { return l.store.DeleteConsumer(consumer) })
}

// write runs one write of kind op on the store: refused uncounted on a
// closed or read-only log or a cancelled ctx, refused and counted after a
// second writer; its error is noted (a poisoned store) and counted.
func (l *Log) write(ctx context.Context, op metrics.Op, f func() error) error {
	if err := l.writableCtx(ctx); err != nil {
		return err
	}
	err := l.ship.Stopped() // a second writer (cmd/bucketlog/doc.go, Errors)
	if err == nil {
		err = f()
		l.noteErr(err)
	}
	l.m.Op(op, outcome(err))
	return err
}

// Health reports whether the shard is whole: Ready, and (with a bucket)
// shipping. The reason says what is wrong.
func (l *Log) Health() (ready bool, reason string) { return l.health((*shipper.Shipper).Health) }

// Ready reports whether the shard takes appends: open, not poisoned, not
// stopped by a second writer, within MaxUnshippedAge when set. A failing
// bucket alone leaves it ready (Health and Status report it).
func (l *Log) Ready() (ready bool, reason string) { return l.health((*shipper.Shipper).Ready) }

func (l *Log) health(check func(*shipper.Shipper) error) (bool, string) {
	return shipper.Readiness(l.closed.Load(), func() bool { return l.poisoned.Load() || l.store.Poisoned() != nil }, l.ship, check)
}

// Status reports the shard's state for operators (shipper.Status).
func (l *Log) Status() Status {
	st := shipper.StatusOf(l.own.Index, l.store, l.ship, l.opts.Now())
	if ok, reason := l.Ready(); !ok && st.Ready {
		st.State, st.Ready, st.Reason = "not_ready", false, reason
	}
	return st
}

// ShippedThrough is the highest sequence the bucket holds contiguously as
// far as this process knows (0 without a bucket). In asynchronous mode an
// event above it would be lost with the local disk.
func (l *Log) ShippedThrough() uint64 { return l.ship.ShippedThrough() }

// SegmentDurable reports whether sealed segment id's bucket object is
// durable (read back equal to the local bytes): what eviction and
// self-healing from the bucket rely on.
func (l *Log) SegmentDurable(id uint64) bool { return l.ship != nil && l.ship.IsDurable(id) }

// Pages bounded by bytes, for answers that must not grow with the count a
// caller asks for (serve's HTTP pages). Each is its count-only namesake
// with a byte budget: the page stops before its records' frames pass
// maxBytes, but always holds the first record in scope, however large;
// cut reports that records within limit were left out (continue after the
// last record returned). maxBytes <= 0 is no budget. Scan, ReadExecution
// and Pull are their namesakes without a budget (Pull keeps its own page).

// ScanBytes is Scan with a byte budget.
func (l *Log) ScanBytes(ctx context.Context, after uint64, limit int, maxBytes int64) (p Page, cut bool, err error) {
	if err := l.checkCtx(ctx); err != nil {
		return Page{}, false, err
	}
	p, cut, err = l.store.ScanBytes(after, limit, maxBytes)
	l.m.Op(metrics.OpScan, outcome(err))
	return p, cut, err
}

// ReadExecutionBytes is ReadExecution with a byte budget for an execution
// this shard owns; another shard's execution is a cold load, whole (never
// cut).
func (l *Log) ReadExecutionBytes(ctx context.Context, executionID string, after uint64, limit int, maxBytes int64) (res ReadResult, cut bool, err error) {
	if err := l.checkCtx(ctx); err != nil {
		return ReadResult{}, false, err
	}
	if shard := l.own.OwnerOf(executionID); shard != l.own.Index && !l.opts.ReadOnly {
		if _, err = localseg.ValidateName("execution id", executionID); err == nil {
			res, err = l.coldRead(ctx, shard, func(r affinity.Reader) (Page, error) { return r.ReadExecution(executionID, after, limit) })
		}
		l.m.Op(metrics.OpRead, outcome(err))
		return res, false, err
	}
	p, cut, err := l.store.ReadExecutionBytes(executionID, after, limit, maxBytes)
	l.m.Op(metrics.OpRead, outcome(err))
	if err != nil {
		return ReadResult{}, false, err
	}
	return ReadResult{Page: p, Shard: l.own.Index, ServedBy: ServedByOwnerResident}, cut, nil
}

// PullBytes is Pull with a byte budget: the consumer is created (or found)
// as by Pull, and its records are those after its cursor.
func (l *Log) PullBytes(ctx context.Context, consumer string, limit int, maxBytes int64) (res PullResult, cut bool, err error) {
	if err := l.writableCtx(ctx); err != nil {
		return PullResult{}, false, err
	}
	if err := l.pullRefused(consumer); err != nil {
		return PullResult{}, false, err
	}
	res, err = l.store.Pull(consumer, 0)
	if err == nil && res.Exists && limit > 0 {
		var p Page
		p, cut, err = l.store.ScanBytes(res.Acked, limit, maxBytes)
		res.Records = p.Records
	}
	l.noteErr(err)
	l.m.Op(metrics.OpPull, outcome(err))
	if err != nil {
		return PullResult{}, false, err
	}
	return res, cut, nil
}
