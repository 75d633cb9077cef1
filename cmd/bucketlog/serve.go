package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/metrics"
)

// HTTP limits (serveAbout).
const (
	// defaultMaxBody caps a request body.
	defaultMaxBody = 16 << 20
	// maxBatchEvents caps the events of one POST /v1/events.
	maxBatchEvents = 10000
	// defaultListen is serve's address: loopback, since serve has no
	// authentication of its own.
	defaultListen = "127.0.0.1:7480"
	// defaultMaxPageBytes caps the records of one page of an answer (scan,
	// per-execution read, pull) in bytes, beside ?limit='s count: a page
	// stops before its records pass it, but always holds one record.
	defaultMaxPageBytes = 8 << 20
	// defaultMaxInflightBodyBytes caps the bytes of request bodies being
	// read or processed at once across the server: four bodies of the
	// largest size.
	defaultMaxInflightBodyBytes = 4 * defaultMaxBody
	// retryAfterSeconds is the Retry-After of a body refused for the
	// in-flight budget.
	retryAfterSeconds = "1"
)

func init() {
	register(command{name: "serve", group: groupServer, run: runServe,
		summary: "serve the owned shard over HTTP (the HTTP API of serve --help, /metrics, /healthz, /readyz)"})
}

// api is serve's HTTP handler: the routes of serveAbout over one owned shard.
// Until setLog hands it the opened engine, every /v1 request and /readyz
// answer 503 (the listener comes up before Open, which may be hydrating a
// shard from the bucket for a long time, so liveness probes see the
// process while it is not ready). It is safe for concurrent use.
type api struct {
	own     affinity.Ownership
	segMax  int64
	maxBody int64
	// maxPage caps a page's record bytes; maxInflight the request body
	// bytes in flight, reserved in inflight.
	maxPage     int64
	maxInflight int64
	metrics     http.Handler
	log         atomic.Pointer[bucketlog.Log]
	mux         *http.ServeMux
	routes      []string // the mux's patterns
	// httpm and ops are the request and refusal series (instrument; nil:
	// not counted).
	httpm *metrics.HTTP
	ops   *metrics.Shard

	inflight atomic.Int64
	live     liveState // waits and streams (serve_wait.go, serve_stream.go)
}

// apiConfig configures newAPI.
type apiConfig struct {
	// own is the shard pair the engine is opened with; requests are routed
	// (and refused with 421) by it.
	own affinity.Ownership
	// segMax is the engine's segment cap, for the up-front size check of
	// every event of a request.
	segMax int64
	// maxBody caps a request body (default 16 MiB).
	maxBody int64
	// maxPage caps the record bytes of one page (default 8 MiB);
	// maxInflight the request body bytes in flight across the server
	// (default 64 MiB, at least maxBody).
	maxPage     int64
	maxInflight int64
	// gatherer is exported on /metrics (nil: /metrics answers 404).
	gatherer prometheus.Gatherer
}

func newAPI(cfg apiConfig) *api {
	a := &api{own: cfg.own, segMax: cfg.segMax, maxBody: cfg.maxBody, maxPage: cfg.maxPage, maxInflight: cfg.maxInflight}
	if a.maxBody <= 0 {
		a.maxBody = defaultMaxBody
	}
	if a.maxPage <= 0 {
		a.maxPage = defaultMaxPageBytes
	}
	if a.maxInflight <= 0 {
		a.maxInflight = max(defaultMaxInflightBodyBytes, a.maxBody)
	}
	if a.segMax <= 0 {
		a.segMax = bucketlog.DefaultSegmentMaxBytes
	}
	m := http.NewServeMux()
	handle := func(pattern string, h http.Handler) {
		m.Handle(pattern, h)
		a.routes = append(a.routes, pattern)
	}
	handle("POST /v1/events", a.ready(a.appendEvents))
	handle("GET /v1/events", a.ready(a.waitable(a.scan, scanProbe)))
	handle("GET /v1/executions/{id}/events", a.ready(a.waitable(a.readExecution, a.execProbe)))
	handle("GET /v1/events/stream", a.ready(a.stream))
	handle("GET /v1/executions/{id}/events/stream", a.ready(a.streamExecution))
	handle("POST /v1/consumers/{name}/pull", a.ready(a.waitable(a.pull, pullProbe)))
	handle("POST /v1/consumers/{name}/ack", a.ready(a.ack))
	handle("DELETE /v1/consumers/{name}", a.ready(a.deleteConsumer))
	handle("GET /v1/consumers", a.ready(a.listConsumers))
	handle("GET /v1/consumers/{name}", a.ready(a.getConsumer))
	handle("GET /healthz", http.HandlerFunc(a.healthz))
	handle("GET /readyz", http.HandlerFunc(a.readyz))
	handle("GET /v1/status", http.HandlerFunc(a.status))
	if cfg.gatherer != nil {
		handle("GET /metrics", promhttp.HandlerFor(cfg.gatherer, promhttp.HandlerOpts{}))
	}
	a.mux = m
	return a
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := a.mux.Handler(r)
	if a.httpm != nil {
		rec := &statusRecorder{ResponseWriter: w}
		defer a.observe(rec, pattern, time.Now())
		w = rec
	}
	if pattern == "" {
		a.noRoute(w, r)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// noRoute answers a request no route takes like every other error, JSON
// {"error","class"}: 404 for an unknown path, 405 (with Allow) for a known
// path with another method. The mux decides which (and redirects, such as
// a path to clean, keep its own answer).
func (a *api) noRoute(w http.ResponseWriter, r *http.Request) {
	probe := &headerOnly{h: http.Header{}}
	a.mux.ServeHTTP(probe, r)
	switch probe.code {
	case http.StatusNotFound:
		writeError(w, nil, &statusError{status: http.StatusNotFound,
			err: usagef("no route %s %s (serve --help lists the routes)", r.Method, r.URL.Path)})
	case http.StatusMethodNotAllowed:
		allow := probe.h.Get("Allow")
		w.Header().Set("Allow", allow)
		writeError(w, nil, &statusError{status: http.StatusMethodNotAllowed,
			err: usagef("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow)})
	default:
		a.mux.ServeHTTP(w, r)
	}
}

// headerOnly records a handler's status and headers and drops its body.
type headerOnly struct {
	h    http.Header
	code int
}

func (h *headerOnly) Header() http.Header { return h.h }
func (h *headerOnly) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}
func (h *headerOnly) Write(p []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return len(p), nil
}

// setLog makes the API ready to serve l.
func (a *api) setLog(l *bucketlog.Log) { a.log.Store(l) }

// errOpening is the answer before the engine is open.
var errOpening = fmt.Errorf("%w: the shard is still opening (recovering the local store, reconciling with or hydrating from the bucket)", bucketlog.ErrNotReady)

// ready wraps a /v1 handler: before the engine is open it answers 503.
// Once open, requests go to the engine even while /readyz says not ready
// (a failing bucket, say): appends keep working and ship when the bucket
// answers again; a poisoned or closed store refuses them itself (503).
func (a *api) ready(h func(http.ResponseWriter, *http.Request, *bucketlog.Log)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		l := a.log.Load()
		if l == nil {
			a.refused(r, errOpening)
			writeError(w, nil, errOpening)
			return
		}
		h(w, r, l)
	}
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	writeBody(w, http.StatusOK, map[string]any{"status": "alive"})
}

// readyOutput is /readyz's answer.
type readyOutput struct {
	Ready  bool   `json:"ready"`
	Shard  int    `json:"shard"`
	Reason string `json:"reason,omitempty"`
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	l := a.log.Load()
	if l == nil {
		writeBody(w, http.StatusServiceUnavailable, readyOutput{Shard: a.own.Index, Reason: errOpening.Error()})
		return
	}
	if ok, reason := l.Ready(); !ok {
		writeBody(w, http.StatusServiceUnavailable, readyOutput{Shard: a.own.Index, Reason: blobtier.RedactText(reason)})
		return
	}
	writeBody(w, http.StatusOK, readyOutput{Ready: true, Shard: a.own.Index})
}

// statusError gives an error an HTTP status its class alone does not
// determine (a body over the cap, a batch over the count limit).
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// httpStatus is the status of err: its own when it carries one, else the
// class's (doc.go, Errors).
func httpStatus(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return bucketlog.HTTPStatus(err)
}

// writeError answers err: {"error","class"} (and "owner_shard" and
// "shard", the shard this replica owns, for not_owner), after the fields of report when there is one (a synchronous
// append the bucket did not confirm answers 202 with its outcome).
func writeError(w http.ResponseWriter, report any, err error) {
	body := "{}"
	if report != nil {
		var b bytes.Buffer
		if writeJSON(&b, emptyLists(report)) == nil {
			body = string(bytes.TrimSpace(b.Bytes()))
		}
	}
	var b bytes.Buffer
	b.WriteString(body[:len(body)-1])
	if body != "{}" {
		b.WriteString(",")
	}
	fmt.Fprintf(&b, `"error":%s,"class":%s`, jsonString(oneLine(err.Error())), jsonString(classify(err)))
	if owner, ok := bucketlog.OwnerShard(err); ok {
		fmt.Fprintf(&b, `,"owner_shard":%d`, owner)
		if noe := (*affinity.NotOwnerError)(nil); errors.As(err, &noe) {
			fmt.Fprintf(&b, `,"shard":%d`, noe.Shard)
		}
	}
	b.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus(err))
	_, _ = w.Write(b.Bytes())
}

// writeBody answers v as JSON (payloads byte for byte: no HTML escaping).
func writeBody(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	if err := writeJSON(&b, emptyLists(v)); err != nil {
		writeError(w, nil, fmt.Errorf("encode the answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
