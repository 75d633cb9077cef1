package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
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
	m.HandleFunc("POST /v1/events", a.ready(a.appendEvents))
	m.HandleFunc("GET /v1/events", a.ready(a.waitable(a.scan, scanProbe)))
	m.HandleFunc("GET /v1/executions/{id}/events", a.ready(a.waitable(a.readExecution, a.execProbe)))
	m.HandleFunc("POST /v1/consumers/{name}/pull", a.ready(a.waitable(a.pull, pullProbe)))
	m.HandleFunc("GET /v1/events/stream", a.ready(a.stream))
	m.HandleFunc("GET /v1/executions/{id}/events/stream", a.ready(a.streamExecution))
	m.HandleFunc("POST /v1/consumers/{name}/ack", a.ready(a.ack))
	m.HandleFunc("DELETE /v1/consumers/{name}", a.ready(a.deleteConsumer))
	m.HandleFunc("GET /healthz", a.healthz)
	m.HandleFunc("GET /readyz", a.readyz)
	if cfg.gatherer != nil {
		m.Handle("GET /metrics", promhttp.HandlerFor(cfg.gatherer, promhttp.HandlerOpts{}))
	}
	a.mux = m
	return a
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern == "" {
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
	if ok, reason := l.Health(); !ok {
		writeBody(w, http.StatusServiceUnavailable, readyOutput{Shard: a.own.Index, Reason: reason})
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

// writeError answers err: {"error","class"} (and "owner_shard" for
// not_owner), after the fields of report when there is one (a synchronous
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

// errBusy refuses a request body the in-flight budget has no room for.
var errBusy = fmt.Errorf("%w: the server is reading as many request bytes as it takes at once (--max-inflight-body-bytes); nothing was written, retry after the Retry-After seconds", bucketlog.ErrNotReady)

// readBody reads a request body of at most a.maxBody bytes and checks it
// as raw bytes: valid UTF-8, and no lone surrogate escape (which
// encoding/json would silently turn into U+FFFD, storing a payload other
// than the one sent).
//
// Before a byte is read the body's size is reserved in the server's
// in-flight budget (its Content-Length, or the whole cap for a body sent
// without one); a body the budget has no room for is refused at once with
// 503 and Retry-After, never buffered or queued. The caller calls release
// once it no longer holds the body or anything decoded from it (release is
// never nil).
func (a *api) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	release = func() {}
	if r.ContentLength > a.maxBody {
		return nil, release, a.tooBig()
	}
	n := a.maxBody
	if r.ContentLength >= 0 {
		n = r.ContentLength
	}
	if a.inflight.Add(n) > a.maxInflight {
		a.inflight.Add(-n)
		w.Header().Set("Retry-After", retryAfterSeconds)
		return nil, release, &statusError{status: http.StatusServiceUnavailable, err: errBusy}
	}
	release = func() { a.inflight.Add(-n) }
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, a.maxBody))
	body = buf.Bytes()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, release, a.tooBig()
	case err != nil:
		return nil, release, fmt.Errorf("%w: read the request body: %v", localseg.ErrInvalidInput, err)
	case !utf8.Valid(body):
		return nil, release, fmt.Errorf("%w: the request body is not valid UTF-8 (refused, never altered)", localseg.ErrInvalidInput)
	}
	if err := checkSurrogates(body); err != nil {
		return nil, release, err
	}
	return body, release, nil
}

func (a *api) tooBig() error {
	return &statusError{status: http.StatusRequestEntityTooLarge,
		err: fmt.Errorf("%w: the request body is over %d bytes", localseg.ErrInvalidInput, a.maxBody)}
}

// decodeStrict decodes one JSON value into v: unknown fields and trailing
// data are refused (a misspelt field must not be silently dropped).
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: malformed JSON: %v", localseg.ErrInvalidInput, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: malformed JSON: data after the object", localseg.ErrInvalidInput)
	}
	return nil
}

// batchBody is POST /v1/events with a batch.
type batchBody struct {
	Events *[]json.RawMessage `json:"events"`
}

// parseEvents reads POST /v1/events: one event, or {"events":[…]}. Every
// event is validated (identifiers, UTF-8, size, ownership) before anything
// is written, so a bad event refuses the whole request.
func (a *api) parseEvents(body []byte) (evs []localseg.Event, batch bool, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, false, fmt.Errorf("%w: malformed JSON: %v (want one event object or {\"events\":[…]})", localseg.ErrInvalidInput, err)
	}
	batchKey := false
	for k := range top {
		batchKey = batchKey || strings.EqualFold(k, "events")
	}
	if !batchKey {
		ev, err := parseEventLine(body, a.segMax)
		if err != nil {
			return nil, false, err
		}
		if err := checkOwned(a.own, ev); err != nil {
			return nil, false, err
		}
		return []localseg.Event{ev}, false, nil
	}
	if _, err := strictObject(body, "batch", "events"); err != nil {
		return nil, true, err
	}
	var bb batchBody
	if err := decodeStrict(body, &bb); err != nil {
		return nil, true, err
	}
	switch {
	case bb.Events == nil:
		return nil, true, fmt.Errorf("%w: \"events\" is null (want a list of events)", localseg.ErrInvalidInput)
	case len(*bb.Events) == 0:
		return nil, true, fmt.Errorf("%w: the batch is empty", localseg.ErrInvalidInput)
	case len(*bb.Events) > maxBatchEvents:
		return nil, true, &statusError{status: http.StatusRequestEntityTooLarge,
			err: fmt.Errorf("%w: the batch holds %d events, over the limit of %d", localseg.ErrInvalidInput, len(*bb.Events), maxBatchEvents)}
	}
	evs = make([]localseg.Event, 0, len(*bb.Events))
	for i, raw := range *bb.Events {
		ev, err := parseEventLine(raw, a.segMax)
		if err == nil {
			err = checkOwned(a.own, ev)
		}
		if err != nil {
			return nil, true, fmt.Errorf("events[%d]: %w", i, err)
		}
		evs = append(evs, ev)
	}
	return evs, true, nil
}

// appendEvents is POST /v1/events.
func (a *api) appendEvents(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	body, release, err := a.readBody(w, r)
	defer release()
	if err != nil {
		writeError(w, nil, err)
		return
	}
	evs, batch, err := a.parseEvents(body)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	if batch {
		res, err := l.AppendBatch(r.Context(), evs)
		out := batchOutput{Action: actionAppendBatch, Appended: res.Appended, FirstSequence: res.FirstSequence, LastSequence: res.LastSequence}
		switch {
		case errors.Is(err, bucketlog.ErrNotInBucket):
			writeError(w, out, notInBucket(err, res.FirstSequence, res.LastSequence))
		case err != nil:
			writeError(w, nil, err)
		default:
			writeBody(w, http.StatusCreated, out)
		}
		return
	}
	ev := evs[0]
	res, err := l.Append(r.Context(), ev)
	out := appendOutput{Action: actionAppend, ExecutionID: ev.ExecutionID, GlobalSequence: res.Seq,
		ByteLen: len(ev.Payload), CreatedStream: res.Created, LogRecordCount: res.Tip}
	switch {
	case errors.Is(err, bucketlog.ErrNotInBucket):
		writeError(w, out, notInBucket(err, res.Seq, res.Seq))
	case err != nil:
		writeError(w, nil, err)
	default:
		writeBody(w, http.StatusCreated, out)
	}
}

// queryPage parses ?after=&limit= (and, with allowAfter false, ?limit=
// only). Unknown or repeated parameters are refused: a misspelt "limt"
// must not silently become the default.
func queryPage(q url.Values, allowAfter bool) (after uint64, limit int, err error) {
	limit = defaultLimit
	for k, vs := range q {
		if len(vs) != 1 {
			return 0, 0, usagef("query parameter %q is given %d times", k, len(vs))
		}
		v := vs[0]
		switch {
		case k == "after" && allowAfter:
			if after, err = strconv.ParseUint(v, 10, 64); err != nil {
				return 0, 0, usagef("after=%q is not a sequence number", v)
			}
		case k == "limit":
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 0 || n > maxLimit {
				return 0, 0, usagef("limit=%q is not a number in 0..%d", v, maxLimit)
			}
			limit = n
		default:
			return 0, 0, usagef("unknown query parameter %q", k)
		}
	}
	return after, limit, nil
}

// scan is GET /v1/events?after=&limit=.
func (a *api) scan(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	after, limit, err := queryPage(r.URL.Query(), true)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	p, cut, err := l.ScanBytes(r.Context(), after, limit, a.maxPage)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	writeBody(w, http.StatusOK, scanPage{scanOf(p), cutOf(cut, p.Records)})
}

// pageCut is what a page cut by --max-page-bytes adds to its answer:
// "truncated":true and "next_after", the last sequence returned (continue
// with ?after=next_after; for a pull, ack it and pull again). A page not
// cut by bytes carries neither (a page cut by ?limit= alone is not
// "truncated": returned < record_count says so, as before).
type pageCut struct {
	Truncated bool   `json:"truncated,omitempty"`
	NextAfter uint64 `json:"next_after,omitempty"`
}

func cutOf(cut bool, recs []localseg.Record) pageCut {
	if !cut || len(recs) == 0 {
		return pageCut{}
	}
	return pageCut{Truncated: true, NextAfter: recs[len(recs)-1].Seq}
}

// The answers of the HTTP API with pageCut's fields after theirs.
type (
	scanPage struct {
		scanOutput
		pageCut
	}
	readPage struct {
		readOutput
		pageCut
	}
	tailPage struct {
		tailOutput
		pageCut
	}
)

// readExecution is GET /v1/executions/{id}/events?after=&limit=. Over HTTP
// a non-owner read is not cold-loaded (serveAbout, Routes): it answers 421 naming the
// owner, so the client asks the owner, which serves it from its resident
// store.
func (a *api) readExecution(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	id, err := checkName("execution_id", r.PathValue("id"))
	if err != nil {
		writeError(w, nil, err)
		return
	}
	after, limit, err := queryPage(r.URL.Query(), true)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	if owner := a.own.OwnerOf(id); owner != a.own.Index {
		writeError(w, nil, &affinity.NotOwnerError{Owner: owner, Shard: a.own.Index, ExecutionID: id})
		return
	}
	res, cut, err := l.ReadExecutionBytes(r.Context(), id, after, limit, a.maxPage)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	writeBody(w, http.StatusOK, readPage{readOf(id, res.Shard, res.ServedBy, res.Page), cutOf(cut, res.Page.Records)})
}

// pull is POST /v1/consumers/{name}/pull?limit=. A body, if any, is
// ignored.
func (a *api) pull(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	name, err := checkName("consumer", r.PathValue("name"))
	if err != nil {
		writeError(w, nil, err)
		return
	}
	_, limit, err := queryPage(r.URL.Query(), false)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	res, cut, err := l.PullBytes(r.Context(), name, limit, a.maxPage)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	writeBody(w, http.StatusOK, tailPage{tailOf(name, res), cutOf(cut, res.Records)})
}

// ackBody is POST /v1/consumers/{name}/ack's body.
type ackBody struct {
	Sequence *uint64 `json:"sequence"`
}

// ack is POST /v1/consumers/{name}/ack with {"sequence":N}.
func (a *api) ack(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	name, err := checkName("consumer", r.PathValue("name"))
	if err != nil {
		writeError(w, nil, err)
		return
	}
	if len(r.URL.Query()) > 0 {
		writeError(w, nil, usagef("ack takes no query parameters (the sequence goes in the body)"))
		return
	}
	body, release, err := a.readBody(w, r)
	defer release()
	if err != nil {
		writeError(w, nil, err)
		return
	}
	if _, err := strictObject(body, "ack body", "sequence"); err != nil {
		writeError(w, nil, err)
		return
	}
	var ab ackBody
	if err := decodeStrict(body, &ab); err != nil {
		writeError(w, nil, err)
		return
	}
	if ab.Sequence == nil {
		writeError(w, nil, fmt.Errorf("%w: missing \"sequence\" (want {\"sequence\":N})", localseg.ErrInvalidInput))
		return
	}
	acked, err := l.Ack(r.Context(), name, *ab.Sequence)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	writeBody(w, http.StatusOK, ackOutput{Action: actionAck, Consumer: name, AckedSequence: acked})
}

// deleteConsumer is DELETE /v1/consumers/{name}: 204, or 404 for an
// unknown consumer.
func (a *api) deleteConsumer(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	name, err := checkName("consumer", r.PathValue("name"))
	if err != nil {
		writeError(w, nil, err)
		return
	}
	if err := l.DeleteConsumer(r.Context(), name); err != nil {
		writeError(w, nil, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveOutput is the line serve prints once it listens.
type serveOutput struct {
	Action string `json:"action"`
	Listen string `json:"listen"`
}

const serveAbout = `
Serves the shard this process owns over HTTP. There is NO
AUTHENTICATION: anyone who reaches the address can append, read, and move or
delete consumers. Keep the default loopback address, or put serve behind a
proxy that authenticates.

Configuration: the environment (NOETL_EHDB_*, NOETL_SHARD_INDEX/COUNT,
BUCKETLOG_BUCKET_URL; bucketlog selfcheck config shows the result), then the
flags. A shard directory that was ever opened with a bucket requires it
(exit 2 without) and refuses another bucket or prefix (exit 2,
nothing written); to re-point it on purpose, stop it and remove its
bucket.json. The local_reference backend is refused (exit 2): serve runs
the durable segment store only.

Once listening it prints one line on stdout:
  {"action":"serve","listen":"HOST:PORT"}
(--listen with port 0 picks a free port; the line has the real one). The
shard is opened after that: until it has recovered (and, with a bucket,
reconciled with or hydrated from it) every /v1 request and /readyz answer
503. If opening fails, a second line {"error","class"} follows and serve
exits with the class's code. An empty shard directory is hydrated from the
bucket: the log then ends where the bucket's copy ends, and in asynchronous
mode the sequences of the lost disk's last tick (acknowledged, never shipped)
are given to new events; a consumer that read them from the old disk sees
other events under those numbers.

Routes (JSON bodies; errors are {"error","class"} plus "owner_shard" for 421):
  POST   /v1/events                          one event {"execution_id","transaction_id","payload"}
                                             → 201 {"action":"eventlog-append",…}
         body {"events":[…]} (≤ 10000)       → 201 {"action":"eventlog-append-batch",…}
         validated whole first: 400 invalid, 421 not owned, 413 too large (event,
         body over --max-body-bytes, or more than 10000 events); nothing written.
         With --sync-to-bucket, 202 with the outcome and "class":"not_in_bucket"
         when the bucket did not confirm in time: the event is durable locally
         and ships later; do NOT retry it (that would store it twice).
  GET    /v1/events?after=N&limit=N          200 the scan outcome ("exists":false when empty)
  GET    /v1/executions/{id}/events?after=&limit=
                                             200 the read outcome; 421 if another shard owns it
                                             (over HTTP a non-owner read is not cold-loaded)
  POST   /v1/consumers/{name}/pull?limit=N   200 the tail outcome
  POST   /v1/consumers/{name}/ack            body {"sequence":N} → 200 the ack outcome
  DELETE /v1/consumers/{name}                204 (404 if unknown)
  GET    /v1/events/stream?after=N           Server-Sent Events (below)
  GET    /v1/executions/{id}/events/stream?after=N
  GET    /metrics                            Prometheus metrics (prefix bucketlog_)
  GET    /healthz                            200 while the process answers
  GET    /readyz                             200 once recovered, hydrated, not poisoned and
                                             shipping; else 503 {"ready":false,"reason"}
limit defaults to 1000, at most 100000. A page also stops before its records
pass --max-page-bytes (default 8 MiB; it always holds one record, however
large): it then adds "truncated":true and "next_after":N, the last sequence
returned; continue with ?after=N (a pull: ack N, pull again). Request bodies
in flight across the server are bounded by --max-inflight-body-bytes
(default 64 MiB; a body without Content-Length counts as --max-body-bytes):
a request beyond it is refused at once, before its body is read, with 503,
"class":"storage" and Retry-After (nothing written; retry). Unknown fields
and query parameters are refused (400). Statuses: 400 usage/invalid_input, 404 unknown consumer,
409 invalid_state, 413 too large, 421 not_owner, 503 storage or not ready.
A batch is refused whole, but a crash in the middle of writing one may leave
an unacknowledged prefix. The log does not de-duplicate client retries.

Waiting: the scan, the per-execution read and the pull take ?wait=D (a Go
duration, at most 5m; 0, the default, answers at once): with no record
beyond the cursor the request is held until an append commits one (then it
answers at once) or D passes (then the empty page); the header
Bucketlog-Wait says which (ready | timeout). A held request outlives the
server's read timeout; a client that goes away ends it; on shutdown it is
answered 503 "the server is shutting down" at once.
Streams: one event per record, "id: <sequence>" and "data: <the record as
in a scan>", after a first "event: start" {"after","base","clamped","tip"}
(what a scan from there says; a start below the reclaim base begins at the
base). A reconnect with the Last-Event-ID header resumes after it (it
overrides ?after=). A comment line ": heartbeat" comes every 15s. The
server ends a stream with "event: end" {"reason","resume_after"}: reason
shutdown, slow_consumer (the subscriber let 10000 records pile up
unread: appends never wait for a subscriber) or error. A connection that
takes nothing for 1m is closed.

With the bucket unreachable serve keeps appending (events are durable on the
local disk) and retrying, and /readyz says why. On SIGTERM, SIGINT or SIGHUP
it stops accepting, finishes requests in flight (--shutdown-timeout), ships
the tail one last time (--shutdown-ship-timeout) and exits 0 when the bucket
holds every event; when it does not, it logs at ERROR how many events remain
unshipped ("sequences A..B": durable on the local disk, they ship on the
next start with the bucket) and exits 7 (not_in_bucket).`

func runServe(c *cli, args []string) int {
	f := newFlags("serve", "[--listen HOST:PORT] [--dir PATH] [--shard-index N --shard-count N] [--bucket URL] [flags]", serveAbout)
	store := addStoreFlags(f)
	route := addRouteFlags(f)
	bucket := addBucketFlag(f, "the bucket the shard ships to")
	listen := f.String("listen", defaultListen, "the `HOST:PORT` to listen on (port 0 picks a free port)")
	tailInterval := f.Duration("tail-interval", 0, "tail replication tick, the loss window of a lost disk (default NOETL_EHDB_TAIL_INTERVAL_SECS, else 15s)")
	sync := f.Bool("sync-to-bucket", false, "an append answers only once the bucket holds it (202 if it does not confirm within --sync-wait)")
	syncWait := f.Duration("sync-wait", 0, "how long --sync-to-bucket waits for the bucket (default 10s)")
	maxBody := f.Int64("max-body-bytes", defaultMaxBody, "cap on a request body in bytes")
	maxPage := f.Int64("max-page-bytes", defaultMaxPageBytes, "cap on the record bytes of one page (scan, read, pull); a page cut by it says \"truncated\":true")
	maxInflight := f.Int64("max-inflight-body-bytes", 0, "cap on the request body bytes in flight across the server; beyond it 503 with Retry-After (default 64 MiB, at least --max-body-bytes)")
	drain := f.Duration("shutdown-timeout", 10*time.Second, "on SIGTERM, how long requests in flight may take to finish")
	startup := f.Duration("startup-timeout", 0, fmt.Sprintf("how long opening retries a bucket that does not answer before it gives up (default %v)", bucketlog.DefaultStartupTimeout))
	shipTimeout := f.Duration("shutdown-ship-timeout", 0, "on SIGTERM, the bound on the last tail shipment (default 10s)")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	env := c.env()
	if useLocalRef(env) {
		return c.fail(usagef("serve runs the durable segment store only; NOETL_EHDB_EVENTLOG_BACKEND=local_reference is for parity tests and migration"))
	}
	opts, own, err := c.shardOptions(f, env, store, route, bucket, tailInterval)
	if err != nil {
		return c.fail(err)
	}
	if *sync {
		if opts.BucketURL == "" {
			return c.fail(usagef("--sync-to-bucket needs a bucket (--bucket or BUCKETLOG_BUCKET_URL)"))
		}
		if opts.DisableTailReplication {
			return c.fail(usagef("--sync-to-bucket needs tail replication (NOETL_EHDB_TAIL_REPLICATION is off)"))
		}
		opts.SyncToBucket = true
	}
	if f.isSet("sync-wait") {
		if *syncWait <= 0 || !*sync {
			return c.fail(usagef("--sync-wait needs --sync-to-bucket and a positive duration"))
		}
		opts.SyncWait = *syncWait
	}
	if *maxBody <= 0 {
		return c.fail(usagef("--max-body-bytes %d must be positive", *maxBody))
	}
	if *maxPage <= 0 {
		return c.fail(usagef("--max-page-bytes %d must be positive", *maxPage))
	}
	if f.isSet("max-inflight-body-bytes") && *maxInflight < *maxBody {
		return c.fail(usagef("--max-inflight-body-bytes %d must be at least --max-body-bytes %d (a body of the largest size could never be taken)", *maxInflight, *maxBody))
	}
	if *drain <= 0 {
		return c.fail(usagef("--shutdown-timeout %v must be positive", *drain))
	}
	if f.isSet("startup-timeout") {
		if *startup <= 0 {
			return c.fail(usagef("--startup-timeout %v must be positive", *startup))
		}
		opts.StartupTimeout = *startup
	}
	if f.isSet("shutdown-ship-timeout") {
		if *shipTimeout <= 0 {
			return c.fail(usagef("--shutdown-ship-timeout %v must be positive", *shipTimeout))
		}
		opts.ShutdownShipTimeout = *shipTimeout
	}

	// A server logs what it does (reclaims, shipping failures) at info; the
	// one-shot commands keep stderr to warnings.
	logger := c.logger(slog.LevelInfo)
	opts.Logger = logger
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	opts.Registerer = reg

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return c.fail(usagef("--listen %s: %v", *listen, err))
	}
	a := newAPI(apiConfig{own: own, segMax: segMax(opts), maxBody: *maxBody, maxPage: *maxPage, maxInflight: *maxInflight, gatherer: reg})
	srv := &http.Server{
		Handler:           a,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(a.stopLive) // waits and streams end at once
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), *drain)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("requests still in flight at the shutdown bound; closing their connections", "err", err)
			_ = srv.Close()
		}
	}
	if code := c.emit(serveOutput{Action: "serve", Listen: ln.Addr().String()}); code != 0 {
		shutdown()
		return code
	}

	l, err := bucketlog.Open(c.ctx, opts)
	if err != nil {
		shutdown()
		if c.ctx.Err() != nil {
			logger.Warn("stopped by a signal before the shard was open", "err", oneLine(err.Error()))
			return 0
		}
		return c.fail(err)
	}
	a.setLog(l)
	if ok, reason := l.Health(); ok {
		logger.Info("serving", "listen", ln.Addr().String(), "shard", own.Index, "shard_count", own.Count, "dir", l.Dir(), "bucket", blobtier.Redact(opts.BucketURL))
	} else {
		logger.Warn("serving, not ready", "listen", ln.Addr().String(), "shard", own.Index, "reason", reason)
	}

	code := 0
	select {
	case <-c.ctx.Done():
		if opts.BucketURL != "" {
			logger.Info("stopping: no new requests; then the tail ships one last time")
		} else {
			logger.Info("stopping: no new requests")
		}
	case err := <-served:
		// The listener failed under us: stop like a SIGTERM, but say so.
		logger.Error("the HTTP server stopped", "err", err)
		code = exitCode(bucketlog.ClassStorage)
	}
	shutdown()
	// No request is in flight any more: the tip is final.
	tip := l.Store().Tip()
	closeErr := l.Close()
	if cc := closeCode(logger, opts.BucketURL != "", tip, l.ShippedThrough(), closeErr); code == 0 {
		code = cc
	}
	return code
}

// closeCode reports how the shard closed and returns the exit code it
// earns: 7 (not_in_bucket) when a bucket is configured and it does not hold
// every event through tip — they are durable on the local disk and ship on
// the next start with the bucket —, else 0 (a close error that lost nothing
// is logged, not an exit code).
func closeCode(logger *slog.Logger, bucket bool, tip, shipped uint64, err error) int {
	if bucket && shipped < tip {
		attrs := []any{"unshipped", tip - shipped, "sequences", fmt.Sprintf("%d..%d", shipped+1, tip)}
		if err != nil {
			attrs = append(attrs, "err", oneLine(err.Error()))
		}
		logger.Error(fmt.Sprintf("stopped with %d events not in the bucket, sequences %d..%d: durable on the local disk, they ship on the next start with the bucket", tip-shipped, shipped+1, tip), attrs...)
		return exitCode(bucketlog.ClassNotInBucket)
	}
	if err != nil {
		logger.Error("closing the shard", "err", oneLine(err.Error()))
		return 0
	}
	logger.Info("stopped")
	return 0
}
