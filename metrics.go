package bucketlog

import "github.com/bucketlog/bucketlog/metrics"

// MetricNames lists every metric the engine exports (README.md, Metrics), without the
// bucketlog_ prefix. The README's metrics reference is checked against it.
var MetricNames = metrics.Names

// outcome is the eventlog_ops_total outcome of an operation's error.
func outcome(err error) metrics.Outcome { return metrics.OutcomeOfClass(Class(err)) }
