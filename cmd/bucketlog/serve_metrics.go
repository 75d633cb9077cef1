package main

import (
	"net/http"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// instrument makes a count its requests (bucketlog_http_*) and the
// requests it refuses before the engine sees them (eventlog_ops_total, the
// engine's own series: a 400 for a malformed body counts like a 400 of the
// engine). Call it before serving.
func (a *api) instrument(httpm *metrics.HTTP, ops *metrics.Shard) {
	a.httpm, a.ops = httpm, ops
}

// instrumentAPI registers a's request series and the shard's on reg.
func instrumentAPI(a *api, reg prometheus.Registerer, shard int) error {
	httpm, err := metrics.NewHTTP(reg, a.routes)
	if err != nil {
		return err
	}
	ops, err := metrics.New(reg, shard)
	if err != nil {
		return err
	}
	a.instrument(httpm, ops)
	return nil
}

// patternOps are the routes whose refusals are counted, by operation.
var patternOps = map[string]metrics.Op{
	"POST /v1/events":                metrics.OpAppend,
	"GET /v1/events":                 metrics.OpScan,
	"GET /v1/executions/{id}/events": metrics.OpRead,
	"POST /v1/consumers/{name}/pull": metrics.OpPull,
	"POST /v1/consumers/{name}/ack":  metrics.OpAck,
	"DELETE /v1/consumers/{name}":    metrics.OpConsumerDelete,
}

// refused counts err (when not nil) as a refusal of r's operation that the
// engine did not see.
func (a *api) refused(r *http.Request, err error) {
	if op, ok := patternOps[r.Pattern]; ok {
		a.refusedOp(op, err)
	}
}

func (a *api) refusedOp(op metrics.Op, err error) {
	if err != nil && a.ops != nil {
		a.ops.Op(op, opOutcome(err))
	}
}

// opOutcome is the eventlog_ops_total outcome of err, by its class (the
// engine's mapping).
func opOutcome(err error) metrics.Outcome {
	switch bucketlog.Class(err) {
	case bucketlog.ClassOK, bucketlog.ClassNotInBucket:
		return metrics.OutcomeOK
	case bucketlog.ClassInvalidInput, bucketlog.ClassUsage:
		return metrics.OutcomeInvalidInput
	case bucketlog.ClassInvalidState:
		return metrics.OutcomeInvalidState
	case bucketlog.ClassNotOwner:
		return metrics.OutcomeNotOwner
	}
	return metrics.OutcomeStorage
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (a *api) observe(rec *statusRecorder, pattern string, start time.Time) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	a.httpm.Observe(pattern, status, time.Since(start))
}
