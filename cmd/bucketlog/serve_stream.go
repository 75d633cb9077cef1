package main

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/internal/live"
	"github.com/bucketlog/bucketlog/localseg"
)

// Streams (serveAbout): GET /v1/events/stream and
// /v1/executions/{id}/events/stream answer Server-Sent Events.
//
// A stream reads the log at its subscriber's pace, woken by commits: an
// append never waits for a subscriber, and the server holds at most one
// page of records per subscriber. A subscriber's backlog — the records
// appended since it connected that it has not been sent — is bounded:
// past defaultStreamMaxLag it is sent an "end" event (reason
// slow_consumer, with the sequence to resume after) and disconnected. A
// connection that takes nothing for defaultStreamStall (its socket full)
// is closed without one: nothing can reach it.
const (
	defaultStreamMaxLag    = 10000
	defaultStreamHeartbeat = 15 * time.Second
	defaultStreamStall     = time.Minute
	// streamPage is how many records a stream reads at a time.
	streamPage = 256
)

// streamStart is the first event of a stream: what a scan from its start
// would say of it (base, clamped), before any record.
type streamStart struct {
	After   uint64 `json:"after"`
	Base    uint64 `json:"base"`
	Clamped bool   `json:"clamped"`
	Tip     uint64 `json:"tip"`
}

// streamEnd is the last event of a stream the server ends.
type streamEnd struct {
	Reason      string `json:"reason"` // shutdown | slow_consumer | error
	Error       string `json:"error,omitempty"`
	Class       string `json:"class,omitempty"`
	ResumeAfter uint64 `json:"resume_after"` // reconnect with Last-Event-ID: this
}

// stream is GET /v1/events/stream?after=N.
func (a *api) stream(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	a.serveStream(w, r, l, "")
}

// streamExecution is GET /v1/executions/{id}/events/stream?after=N: the
// owner's records of one execution (421 for another shard's).
func (a *api) streamExecution(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
	id, err := checkName("execution_id", r.PathValue("id"))
	if err != nil {
		writeError(w, nil, err)
		return
	}
	if owner := a.own.OwnerOf(id); owner != a.own.Index {
		writeError(w, nil, &affinity.NotOwnerError{Owner: owner, Shard: a.own.Index, ExecutionID: id})
		return
	}
	a.serveStream(w, r, l, id)
}

// streamAfter is where a stream starts: Last-Event-ID when the client
// sends one (an EventSource reconnecting), else ?after= (default 0).
func streamAfter(r *http.Request) (uint64, error) {
	var after uint64
	for k, vs := range r.URL.Query() {
		if k != "after" || len(vs) != 1 {
			return 0, usagef("a stream takes one query parameter, after=N (got %q)", k)
		}
		n, err := strconv.ParseUint(vs[0], 10, 64)
		if err != nil {
			return 0, usagef("after=%q is not a sequence number", vs[0])
		}
		after = n
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return 0, usagef("Last-Event-ID %q is not a sequence number", id)
		}
		after = n
	}
	return after, nil
}

func (a *api) streamLimits() (maxLag uint64, heartbeat, stall time.Duration) {
	maxLag, heartbeat, stall = a.live.maxLag, a.live.heartbeat, a.live.stall
	if maxLag == 0 {
		maxLag = defaultStreamMaxLag
	}
	if heartbeat <= 0 {
		heartbeat = defaultStreamHeartbeat
	}
	if stall <= 0 {
		stall = defaultStreamStall
	}
	return maxLag, heartbeat, stall
}

// sse frames events: "id:", "event:" and "data:" lines and a blank line.
type sse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	buf   bytes.Buffer
}

func (s *sse) event(id, name string, v any) {
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	if name != "" {
		s.buf.WriteString("event: " + name + "\n")
	}
	s.buf.WriteString("data: ")
	_ = writeJSON(&s.buf, v) // one line: JSON escapes every line break; writeJSON ends it
	s.buf.WriteString("\n")
}

// flush writes what is framed, within the stall bound.
func (s *sse) flush() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.stall))
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err == nil {
		err = s.rc.Flush()
	}
	return err
}

func (a *api) serveStream(w http.ResponseWriter, r *http.Request, l *bucketlog.Log, exec string) {
	after, err := streamAfter(r)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	maxLag, heartbeat, stall := a.streamLimits()
	ctx, cancel := a.liveCtx(r)
	defer cancel()
	read := func(after uint64) (localseg.Page, error) {
		if exec == "" {
			p, _, err := l.ScanBytes(ctx, after, streamPage, a.maxPage)
			return p, err
		}
		res, _, err := l.ReadExecutionBytes(ctx, exec, after, streamPage, a.maxPage)
		return res.Page, err
	}
	src := live.Closing(l.Store(), bucketlog.ErrClosed)
	liveFrom := l.Store().Tip()
	p, err := read(after)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // a stream outlives the server's ReadTimeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: rc, stall: stall}
	s.event("", "start", streamStart{After: after, Base: max(p.Base, 1), Clamped: p.Clamped, Tip: l.Store().Tip()})
	end := func(reason string, err error) {
		e := streamEnd{Reason: reason, ResumeAfter: after}
		if err != nil {
			e.Error, e.Class = oneLine(err.Error()), classify(err)
		}
		s.event("", "end", e)
		_ = s.flush()
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		for _, rec := range records(p.Records) {
			s.event(strconv.FormatUint(rec.GlobalSequence, 10), "", rec)
		}
		if n := len(p.Records); n > 0 {
			after = p.Records[n-1].Seq
		}
		if err := s.flush(); err != nil {
			return // the client is gone, or took nothing for the stall bound
		}
		ch, err := src.TipChanged()
		if err != nil {
			end("shutdown", err)
			return
		}
		if tip := l.Store().Tip(); tip > max(after, liveFrom)+maxLag {
			end("slow_consumer", nil)
			return
		}
		if len(p.Records) == 0 {
			select {
			case <-ch:
			case <-beat.C:
				s.buf.WriteString(": heartbeat\n\n")
				continue
			case <-ctx.Done():
				if err := context.Cause(ctx); isShutdown(err) {
					end("shutdown", err)
				}
				return
			}
		}
		if p, err = read(after); err != nil {
			if ctx.Err() == nil {
				end("error", err)
			} else if isShutdown(context.Cause(ctx)) {
				end("shutdown", context.Cause(ctx))
			}
			return
		}
	}
}
