package bucketlog

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
)

// MetricNames lists every metric the engine exports (README.md, Metrics), without the
// bucketlog_ prefix. The README's metrics reference is checked against it.
var MetricNames = metrics.Names

// The label values of eventlog_ops_total, created at start so every series
// exists at zero from the first scrape.
var (
	opOperations = metrics.Operations
	opOutcomes   = metrics.Outcomes
)

func newMetrics(reg prometheus.Registerer, shard int) (*metrics.Shard, error) {
	m, err := metrics.New(reg, shard)
	if errors.Is(err, metrics.ErrRegistered) {
		return nil, usagef("%v", err)
	}
	return m, err
}

// outcome is the eventlog_ops_total outcome of an operation's error.
func outcome(err error) metrics.Outcome {
	switch Class(err) {
	case ClassOK, ClassNotInBucket:
		return metrics.OutcomeOK
	case ClassInvalidInput, ClassUsage:
		return metrics.OutcomeInvalidInput
	case ClassInvalidState:
		return metrics.OutcomeInvalidState
	case ClassNotOwner:
		return metrics.OutcomeNotOwner
	}
	return metrics.OutcomeStorage
}

// storeObserver routes the store's callbacks: fsync timings to the metrics,
// seals to the seal hook (the uploader's wake-up), two separate concerns.
type storeObserver struct {
	fsync  prometheus.Observer
	sealed func(localseg.SegmentInfo)
}

func (o storeObserver) Fsync(d time.Duration)            { o.fsync.Observe(d.Seconds()) }
func (o storeObserver) Sealed(info localseg.SegmentInfo) { o.sealed(info) }
