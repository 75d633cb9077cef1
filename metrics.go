package bucketlog

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketlog/bucketlog/metrics"
)

// MetricNames lists every metric the engine exports (README.md, Metrics), without the
// bucketlog_ prefix. The README's metrics reference is checked against it.
var MetricNames = metrics.Names

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
