package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/metrics"
)

// errBusy refuses a request body the in-flight budget has no room for.
var errBusy = fmt.Errorf("%w: the server is reading as many request bytes as it takes at once (--max-inflight-body-bytes); nothing was written, retry after the Retry-After seconds", bucketlog.ErrNotReady)

// readBody reads a request body of at most a.maxBody bytes and checks it
// as raw bytes: valid UTF-8, and no lone surrogate escape (which
// encoding/json would silently turn into U+FFFD, storing a payload other
// than the one sent).
//
// Before a byte is read the body's size is reserved in the server's
// in-flight budget (its Content-Length); a body sent without one reserves
// as it is read, bodyStep bytes ahead (budgetReader). A body the budget has
// no room for is refused with 503 and Retry-After, never buffered or
// queued: at once, or midway for one without Content-Length. The caller
// calls release once it no longer holds the body or anything decoded from
// it (release is never nil).
func (a *api) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	defer func() { a.refused(r, err) }()
	release = func() {}
	if r.ContentLength > a.maxBody {
		return nil, release, a.tooBig()
	}
	busy := func() error {
		w.Header().Set("Retry-After", retryAfterSeconds)
		return &statusError{status: http.StatusServiceUnavailable, err: errBusy}
	}
	src := r.Body
	if n := r.ContentLength; n >= 0 {
		if !a.reserve(n) {
			return nil, release, busy()
		}
		release = func() { a.inflight.Add(-n) }
	} else {
		br := &budgetReader{a: a, r: r.Body, limit: a.maxBody}
		src, release = br, func() { a.inflight.Add(-br.reserved) }
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(w, src, a.maxBody))
	body = buf.Bytes()
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errBudget):
		return nil, release, busy()
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
	defer func() { a.refusedOp(metrics.OpAppend, err) }()
	if evs, batch, ok := scanEvents(body); ok {
		return a.checkEvents(evs, batch)
	}
	return a.parseEventsStrict(body)
}

// parseEventsStrict is parseEvents for any body: the general decoding,
// whose refusals (and their messages) are the API's.
func (a *api) parseEventsStrict(body []byte) (evs []localseg.Event, batch bool, err error) {
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
			return nil, true, errorAt(i, err)
		}
		evs = append(evs, ev)
	}
	return evs, true, nil
}

// errorAt names the event of a batch err refuses.
func errorAt(i int, err error) error { return fmt.Errorf("events[%d]: %w", i, err) }

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
		out, report, err := batchAnswer(len(evs), res, err)
		if err != nil {
			writeError(w, report, err)
			return
		}
		writeBody(w, appendStatus(res.Appended > 0), out)
		return
	}
	ev := evs[0]
	res, err := l.Append(r.Context(), ev)
	out := appendOutput{Action: actionAppend, ExecutionID: ev.ExecutionID, GlobalSequence: res.Seq,
		ByteLen: len(ev.Payload), CreatedStream: res.Created, LogRecordCount: res.Tip, Duplicate: res.Duplicate}
	switch {
	case errors.Is(err, bucketlog.ErrNotInBucket):
		writeError(w, out, notInBucket(err, res.Seq, res.Seq))
	case err != nil:
		writeError(w, nil, err)
	default:
		writeAppend(w, appendStatus(!res.Duplicate), out)
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
