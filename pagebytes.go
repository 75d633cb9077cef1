package bucketlog

import (
	"context"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
)

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
