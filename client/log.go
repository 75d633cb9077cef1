package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bucketlog/bucketlog"
)

// Event is one event to append. An empty TransactionID is filled by the
// client (Options.NewTransactionID) once per call.
type Event struct {
	ExecutionID   string `json:"execution_id"`
	TransactionID string `json:"transaction_id"`
	Payload       string `json:"payload"`
}

// AppendResult is the outcome of Append.
type AppendResult struct {
	ExecutionID string `json:"execution_id"`
	// Sequence is the event's global sequence (the original one when
	// Duplicate).
	Sequence       uint64 `json:"global_sequence"`
	ByteLen        int    `json:"byte_len"`
	CreatedStream  bool   `json:"created_stream"`
	LogRecordCount uint64 `json:"log_record_count"`
	// Duplicate: the transaction id was already in the log with this
	// content; nothing was written. After a retry it is the usual answer
	// to an attempt whose first answer was lost.
	Duplicate bool `json:"duplicate"`
	// TransactionID is the id sent (the caller's, or the one generated);
	// Attempts how many requests it took.
	TransactionID string `json:"-"`
	Attempts      int    `json:"-"`
}

// Append appends one event, retrying transient failures with the same
// transaction id (doc.go, Retries). On error the result still carries the
// TransactionID (retry with it), and after a final 202 (errors.Is
// bucketlog.ErrNotInBucket) the sequence the event holds on the server's
// disk.
func (c *Client) Append(ctx context.Context, ev Event) (AppendResult, error) {
	if ev.TransactionID == "" {
		ev.TransactionID = c.opts.NewTransactionID()
	}
	res := AppendResult{TransactionID: ev.TransactionID}
	body, err := encodeEvent(ev, -1)
	if err != nil {
		return res, err
	}
	var out AppendResult
	o, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/events", body: body,
		ok: []int{http.StatusOK, http.StatusCreated}, retryNotInBucket: true, executionID: ev.ExecutionID}, &out)
	out.TransactionID, out.Attempts = ev.TransactionID, o.attempts
	return out, err
}

// BatchResult is the outcome of AppendBatch.
type BatchResult struct {
	Appended      int         `json:"appended"`
	FirstSequence uint64      `json:"first_sequence"`
	LastSequence  uint64      `json:"last_sequence"`
	Duplicates    []Duplicate `json:"duplicates"`
	// TransactionIDs are the ids sent, in batch order; Attempts how many
	// requests it took.
	TransactionIDs []string `json:"-"`
	Attempts       int      `json:"-"`
}

// Duplicate is an event of a batch that was not written: its transaction
// id was in the log (or earlier in the batch), at Sequence.
type Duplicate struct {
	Index    int    `json:"index"`
	Sequence uint64 `json:"global_sequence"`
}

// AppendBatch appends events as one request (at most 10000; the server
// validates the whole batch first and refuses it whole), retrying like
// Append. After a retry, events an earlier lost attempt wrote are listed
// in Duplicates.
func (c *Client) AppendBatch(ctx context.Context, events []Event) (BatchResult, error) {
	evs := make([]Event, len(events))
	ids := make([]string, len(events))
	for i, ev := range events {
		if ev.TransactionID == "" {
			ev.TransactionID = c.opts.NewTransactionID()
		}
		evs[i], ids[i] = ev, ev.TransactionID
	}
	res := BatchResult{TransactionIDs: ids}
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	for i, ev := range evs {
		one, err := encodeEvent(ev, i)
		if err != nil {
			return res, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(bytes.TrimSpace(one))
	}
	b.WriteString("]}")
	var out BatchResult
	o, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/events", body: b.Bytes(),
		ok: []int{http.StatusOK, http.StatusCreated}, retryNotInBucket: true}, &out)
	out.TransactionIDs, out.Attempts = ids, o.attempts
	return out, err
}

// encodeEvent is the JSON of ev. encoding/json would replace invalid UTF-8
// with U+FFFD and send a payload other than the caller's: it is refused
// here instead (the server refuses it too). index ≥ 0 names a batch event.
func encodeEvent(ev Event, index int) ([]byte, error) {
	for _, f := range []struct{ name, v string }{{"execution_id", ev.ExecutionID}, {"transaction_id", ev.TransactionID}, {"payload", ev.Payload}} {
		if !utf8.ValidString(f.v) {
			if index >= 0 {
				return nil, fmt.Errorf("%w: events[%d]: %s is not valid UTF-8 (refused, never altered)", bucketlog.ErrInvalidInput, index, f.name)
			}
			return nil, fmt.Errorf("%w: %s is not valid UTF-8 (refused, never altered)", bucketlog.ErrInvalidInput, f.name)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, fmt.Errorf("%w: encode the event: %v", bucketlog.ErrInvalidInput, err)
	}
	return b.Bytes(), nil
}

// Record is one event as the log holds it.
type Record struct {
	Sequence      uint64 `json:"global_sequence"`
	ExecutionID   string `json:"execution_id"`
	TransactionID string `json:"transaction_id"`
	ByteLen       int    `json:"byte_len"`
	Payload       string `json:"payload"`
}

// Page is the outcome of a scan or of a per-execution read.
type Page struct {
	Exists bool `json:"exists"`
	// Base is the lowest sequence still held; Clamped says the request's
	// After was below it (the page starts at Base).
	Base        uint64   `json:"base"`
	Clamped     bool     `json:"clamped"`
	RecordCount uint64   `json:"record_count"`
	Returned    int      `json:"returned"`
	Records     []Record `json:"records"`
	// Truncated: the page stopped at the server's byte cap; continue after
	// NextAfter.
	Truncated bool   `json:"truncated"`
	NextAfter uint64 `json:"next_after"`
}

// ReadRequest pages a scan or a per-execution read.
type ReadRequest struct {
	// After is the last sequence already seen (0: from the start).
	After uint64
	// Limit caps the records (0: the server's default, 1000).
	Limit int
	// Wait, when positive, long-polls: the server answers as soon as one
	// record lies beyond After, or with an empty page when Wait passes.
	Wait time.Duration
}

func (r ReadRequest) query(after bool) url.Values {
	q := url.Values{}
	if after && r.After > 0 {
		q.Set("after", strconv.FormatUint(r.After, 10))
	}
	if r.Limit > 0 {
		q.Set("limit", strconv.Itoa(r.Limit))
	}
	if r.Wait > 0 {
		q.Set("wait", r.Wait.String())
	}
	return q
}

// Scan reads a page of the shard's log.
func (c *Client) Scan(ctx context.Context, r ReadRequest) (Page, error) {
	var p Page
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/events", query: r.query(true), ok: []int{http.StatusOK}, wait: r.Wait}, &p)
	return p, err
}

// ExecutionPage is the outcome of ReadExecution.
type ExecutionPage struct {
	Page
	ExecutionID string `json:"execution_id"`
	Shard       int    `json:"shard"`
	ServedBy    string `json:"served_by"`
}

// ReadExecution reads a page of one execution's events. Another shard's
// execution is a 421 naming the owner (OwnerShard).
func (c *Client) ReadExecution(ctx context.Context, executionID string, r ReadRequest) (ExecutionPage, error) {
	var p ExecutionPage
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/executions/" + url.PathEscape(executionID) + "/events",
		query: r.query(true), ok: []int{http.StatusOK}, wait: r.Wait, executionID: executionID}, &p)
	return p, err
}
