package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DefaultFollowWait is Follow's long-poll wait when FollowRequest.Wait is
// zero.
const DefaultFollowWait = 30 * time.Second

// FollowRequest starts Follow.
type FollowRequest struct {
	// After is the last sequence already seen.
	After uint64
	// Limit caps one page (0: the server's default).
	Limit int
	// Wait is each long poll's wait (default DefaultFollowWait; at most 5
	// minutes on the server).
	Wait time.Duration
}

// Follow yields the log's records after r.After as they are appended,
// over long-polled scans (?wait=): one request at a time, each answered
// as soon as a record lies beyond the last one yielded. A page cut by the
// byte cap continues at NextAfter; a start below the reclaimed base
// continues at the base (the records below are gone). Transient failures
// are retried inside Scan; an error that outlasts them is yielded and ends
// the iteration, as does the end of ctx (yielded as ctx's error).
func (c *Client) Follow(ctx context.Context, r FollowRequest) iter.Seq2[Record, error] {
	if r.Wait <= 0 {
		r.Wait = DefaultFollowWait
	}
	return func(yield func(Record, error) bool) {
		after := r.After
		for {
			p, err := c.Scan(ctx, ReadRequest{After: after, Limit: r.Limit, Wait: r.Wait})
			if err != nil {
				yield(Record{}, err)
				return
			}
			for _, rec := range p.Records {
				if rec.Sequence <= after {
					continue
				}
				after = rec.Sequence
				if !yield(rec, nil) {
					return
				}
			}
			if p.Truncated && p.NextAfter > after {
				after = p.NextAfter
			}
		}
	}
}

// StreamRequest starts Stream.
type StreamRequest struct {
	// After is the last sequence already seen.
	After uint64
	// ExecutionID, when set, streams that execution's events only
	// (GET /v1/executions/{id}/events/stream).
	ExecutionID string
}

// Stream yields the records after r.After from the server's Server-Sent
// Events stream (GET /v1/events/stream?after=N): each event's id: is the
// sequence and its data: the record as in a scan. When the connection
// drops (a restart, a slow-client disconnect) it reconnects with backoff
// (Options.Retry; the count of attempts restarts after each event
// received) sending Last-Event-ID, the last sequence yielded, so a record
// is yielded once and in order. Events without an id (comments, the
// opening "start" summary) are skipped; serve's "end" event whose reason
// is error, or an event named "error", carrying {"error","class"} is a
// refusal: a transient one (storage, not ready) reconnects, any other is
// yielded; an end for shutdown or slow_consumer reconnects. A refusal of the
// request itself (4xx) is yielded and ends the iteration, as does the end
// of ctx.
func (c *Client) Stream(ctx context.Context, r StreamRequest) iter.Seq2[Record, error] {
	path := "/v1/events/stream"
	if r.ExecutionID != "" {
		path = "/v1/executions/" + url.PathEscape(r.ExecutionID) + "/events/stream"
	}
	return func(yield func(Record, error) bool) {
		last, failures := r.After, 0
		for {
			got, err := c.streamOnce(ctx, path, r, last, func(rec Record) bool {
				last = rec.Sequence
				return yield(rec, nil)
			})
			if errors.Is(err, errStopped) {
				return
			}
			if got > 0 {
				failures = 0
			}
			if ctx.Err() != nil {
				yield(Record{}, ctx.Err())
				return
			}
			var e *Error
			if err != nil && errors.As(err, &e) && !transient(request{}, e.Status, err) && !errors.Is(err, ErrStorage) {
				yield(Record{}, err)
				return
			}
			failures++
			if c.retry.MaxAttempts > 0 && failures >= c.retry.MaxAttempts {
				yield(Record{}, fmt.Errorf("stream: after %d attempts: %w", failures, err))
				return
			}
			t := time.NewTimer(backoff(c.retry, failures))
			select {
			case <-ctx.Done():
				t.Stop()
				yield(Record{}, ctx.Err())
				return
			case <-t.C:
			}
		}
	}
}

// errStopped: the consumer of the iterator stopped.
var errStopped = errors.New("stream: stopped")

// streamOnce reads one connection of the stream, handing each record past
// last to emit; it returns how many it handed and why the connection ended.
func (c *Client) streamOnce(ctx context.Context, path string, r StreamRequest, last uint64, emit func(Record) bool) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{}
	q.Set("after", strconv.FormatUint(r.After, 10))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+path+"?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last > r.After {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(last, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: stream: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &Error{Status: resp.StatusCode, ExecutionID: r.ExecutionID}
		var eb errorBody
		if json.Unmarshal(data, &eb) == nil {
			e.Class, e.Message = eb.Class, eb.Error
			eb.owner(e)
		}
		return 0, e
	}
	n := 0
	err = readSSE(resp.Body, func(ev sseEvent) error {
		if string(ev.name) == "error" {
			var eb errorBody
			if json.Unmarshal(ev.data, &eb) != nil {
				return fmt.Errorf("%w: stream: an error event %q", ErrUnavailable, ev.data)
			}
			return &Error{Status: http.StatusOK, Class: eb.Class, Message: eb.Error}
		}
		if string(ev.name) == "end" {
			// serve's last event: reason error with a class is a refusal
			// (the caller reconnects only for a transient one); shutdown
			// and slow_consumer reconnect.
			var end struct{ Reason, Error, Class string }
			_ = json.Unmarshal(ev.data, &end)
			if end.Reason == "error" && end.Class != "" {
				return &Error{Status: http.StatusOK, Class: end.Class, Message: end.Error}
			}
			return fmt.Errorf("%w: stream: the server ended the stream (%s)", ErrUnavailable, end.Reason)
		}
		if len(ev.id) == 0 {
			return nil
		}
		seq, ok := parseSeq(ev.id)
		if !ok {
			return fmt.Errorf("%w: stream: event id %q is not a sequence", ErrUnavailable, ev.id)
		}
		if seq <= last {
			return nil // already yielded before a reconnect
		}
		rec, err := decodeRecord(ev.data)
		if err != nil {
			return fmt.Errorf("%w: stream: event %d: %v", ErrUnavailable, seq, err)
		}
		rec.Sequence = seq
		last = seq
		n++
		if !emit(rec) {
			return errStopped
		}
		return nil
	})
	if err == nil {
		err = fmt.Errorf("%w: stream: the server closed the stream", ErrUnavailable)
	}
	return n, err
}
