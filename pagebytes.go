package bucketlog

import (
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
// and Pull keep returning whole pages.

// ScanBytes is Scan with a byte budget.
func (l *Log) ScanBytes(after uint64, limit int, maxBytes int64) (p localseg.Page, cut bool, err error) {
	if err := l.check(); err != nil {
		return localseg.Page{}, false, err
	}
	p, cut, err = l.store.ScanBytes(after, limit, maxBytes)
	l.m.Op(metrics.OpScan, outcome(err))
	return p, cut, err
}

// ReadExecutionBytes is ReadExecution with a byte budget for an execution
// this shard owns; another shard's execution is ReadExecution's cold load,
// whole (never cut).
func (l *Log) ReadExecutionBytes(executionID string, after uint64, limit int, maxBytes int64) (res ReadResult, cut bool, err error) {
	if err := l.check(); err != nil {
		return ReadResult{}, false, err
	}
	if l.route != nil && l.own.OwnerOf(executionID) != l.own.Index {
		res, err = l.ReadExecution(executionID, after, limit)
		return res, false, err
	}
	p, cut, err := l.store.ReadExecutionBytes(executionID, after, limit, maxBytes)
	l.m.Op(metrics.OpRead, outcome(err))
	if err != nil {
		return ReadResult{}, false, err
	}
	return ReadResult{Page: p, Shard: l.own.Index, ServedBy: affinity.ServedByOwnerResident}, cut, nil
}

// PullBytes is Pull with a byte budget: the consumer is created (or found)
// as by Pull, and its records are those after its cursor.
func (l *Log) PullBytes(consumer string, limit int, maxBytes int64) (res localseg.PullResult, cut bool, err error) {
	if err := l.writable(); err != nil {
		return localseg.PullResult{}, false, err
	}
	res, err = l.route.Pull(l.own.Index, consumer, 0)
	if err == nil && res.Exists && limit > 0 {
		var p localseg.Page
		p, cut, err = l.store.ScanBytes(res.Acked, limit, maxBytes)
		res.Records = p.Records
	}
	l.noteErr(err)
	l.m.Op(metrics.OpPull, outcome(err))
	if err != nil {
		return localseg.PullResult{}, false, err
	}
	return res, cut, nil
}
