package main

import (
	"bytes"
	"context"
	"errors"
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
// A stream first reads the retained history at its subscriber's pace,
// then joins the live hub (internal/live.Hub): one goroutine reads each
// commit's records once, frames them once into a tail shared by every
// subscriber and wakes each at most once per gap (streamLinger), without
// waiting for any, so appends never wait for a subscriber; a stream
// writes a busy publication as it lies in the hub's block (sse.send). A subscriber whose buffer holds defaultStreamBuffer
// records (or defaultStreamBufferBytes) it has not taken is sent what it
// holds, then an "end" event (reason slow_consumer, with the sequence to
// resume after), and disconnected. A connection that takes nothing for
// defaultStreamStall (its socket full) is closed without one: nothing can
// reach it.
const (
	defaultStreamBuffer      = 10000
	defaultStreamBufferBytes = 16 << 20
	defaultStreamHeartbeat   = 15 * time.Second
	defaultStreamStall       = time.Minute
	// streamLinger and streamLingerPerSub batch busy streams' writes:
	// the hub publishes at most once per streamLinger, or per
	// streamLingerPerSub for each subscriber when that is longer (50 ms,
	// live.DefaultMaxGap, from 100 on), so a burst of commits costs each subscriber one wake-up
	// and one write per gap, not one per commit, and delivery's share of
	// the CPU stays bounded however many subscribe; the first record
	// after a quiet spell goes out at once.
	streamLinger       = live.DefaultMinGap
	streamLingerPerSub = live.DefaultGapPerSub
	// streamPage is how many records a stream reads at a time while it
	// catches up.
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

func (a *api) streamLimits() (buffer int, heartbeat, stall time.Duration) {
	buffer, heartbeat, stall = a.live.buffer, a.live.heartbeat, a.live.stall
	if buffer <= 0 {
		buffer = defaultStreamBuffer
	}
	if heartbeat <= 0 {
		heartbeat = defaultStreamHeartbeat
	}
	if stall <= 0 {
		stall = defaultStreamStall
	}
	return buffer, heartbeat, stall
}

// hub is the live hub of l, made by the first stream.
func (a *api) hub(l *bucketlog.Log) *live.Hub {
	a.live.hubOnce.Do(func() {
		buffer, _, _ := a.streamLimits()
		st := l.Store()
		a.live.hubv = live.NewHub(live.Closing(st, bucketlog.ErrClosed),
			func(after uint64, limit int) ([]localseg.Record, bool, error) {
				p, cut, err := st.ScanBytes(after, limit, a.maxPage)
				return p.Records, cut, err
			},
			func(r localseg.Record) []byte { return recordFrame(r) }, buffer, defaultStreamBufferBytes)
		a.live.hubv.MinGap, a.live.hubv.GapPerSub = streamLinger, streamLingerPerSub
	})
	return a.live.hubv
}

// recordFrame is one record's event: id: its sequence, data: the record
// as a scan shows it.
func recordFrame(r localseg.Record) []byte {
	var b bytes.Buffer
	b.WriteString("id: " + strconv.FormatUint(r.Seq, 10) + "\ndata: ")
	_ = writeJSON(&b, records([]localseg.Record{r})[0]) // one line: JSON escapes every line break
	b.WriteString("\n")
	return b.Bytes()
}

// sse frames events: "id:", "event:" and "data:" lines and a blank line.
type sse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	buf   bytes.Buffer
	set   time.Time // when the write deadline was last moved
	sent  bool      // send wrote since the last flush
}

// directWrite: a run of frames this long (a busy stream's publication)
// is written as it lies in the hub's block, shared by every subscriber,
// not copied into the stream's buffer first.
const directWrite = 4 << 10

// send writes run (frames of the hub's, live.Runs) or buffers it when
// short; flush ends what send began.
func (s *sse) send(run []byte) error {
	if len(run) < directWrite {
		s.buf.Write(run)
		return nil
	}
	s.deadline()
	if s.buf.Len() > 0 {
		if _, err := s.w.Write(s.buf.Bytes()); err != nil {
			return err
		}
		s.buf.Reset()
	}
	s.sent = true
	_, err := s.w.Write(run)
	return err
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

// flush writes what is framed, within the stall bound: the deadline is
// moved at most every stall/16 (one system call fewer per write), so each
// write has between 15/16 of the bound and all of it.
func (s *sse) flush() error {
	if s.buf.Len() == 0 && !s.sent {
		return nil
	}
	s.deadline()
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	s.sent = false
	if err == nil {
		err = s.rc.Flush()
	}
	return err
}

// deadline moves the write deadline to the stall bound, at most every
// stall/16.
func (s *sse) deadline() {
	if now := time.Now(); now.Sub(s.set) >= s.stall/16 {
		_ = s.rc.SetWriteDeadline(now.Add(s.stall))
		s.set = now
	}
}

func (a *api) serveStream(w http.ResponseWriter, r *http.Request, l *bucketlog.Log, exec string) {
	after, err := streamAfter(r)
	if err != nil {
		writeError(w, nil, err)
		return
	}
	_, heartbeat, stall := a.streamLimits()
	ctx, cancel := a.liveCtx(r)
	defer cancel()
	st := l.Store()
	// read is one page of history after a sequence, and the sequence it
	// covers: every record in scope up to it was returned (the tip, unless
	// the page is full or cut and more follows).
	read := func(after uint64) (localseg.Page, uint64, error) {
		tip := st.Tip()
		var p localseg.Page
		var cut bool
		var err error
		if exec == "" {
			p, cut, err = l.ScanBytes(ctx, after, streamPage, a.maxPage)
		} else {
			var res bucketlog.ReadResult
			res, cut, err = l.ReadExecutionBytes(ctx, exec, after, streamPage, a.maxPage)
			p = res.Page
		}
		covered := max(after, tip)
		if n := len(p.Records); n > 0 && (cut || n == streamPage) {
			covered = p.Records[n-1].Seq
		}
		return p, covered, err
	}
	p, covered, err := read(after)
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
	// No chunked encoding: the body runs to the connection's close (as
	// the SSE recommendation suggests), so a write is one system call,
	// not a chunk header, the frames and a trailer.
	h.Set("Transfer-Encoding", "identity")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: rc, stall: stall}
	s.event("", "start", streamStart{After: after, Base: max(p.Base, 1), Clamped: p.Clamped, Tip: st.Tip()})
	end := func(reason string, err error) {
		e := streamEnd{Reason: reason, ResumeAfter: after}
		if err != nil {
			e.Error, e.Class = oneLine(err.Error()), classify(err)
		}
		s.event("", "end", e)
		_ = s.flush()
	}
	// History, at the subscriber's pace, until the hub takes it.
	hub := a.hub(l)
	var sub *live.Sub
	for sub == nil {
		for _, rec := range p.Records {
			s.buf.Write(recordFrame(rec))
			after = rec.Seq
		}
		if err := s.flush(); err != nil {
			return // the client is gone, or took nothing for the stall bound
		}
		if n := len(p.Records); n == 0 || covered > p.Records[n-1].Seq || covered == st.Tip() {
			// Nothing more to read now: join, unless the hub has
			// offered records beyond covered (then read them first).
			if sub, _ = hub.Join(covered, exec); sub != nil {
				break
			}
		}
		if p, covered, err = read(covered); err != nil {
			a.endStream(ctx, end, err)
			return
		}
	}
	defer hub.Leave(sub)
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		items, err := sub.Take()
		var ferr error
		for run := range live.Runs(items) {
			if ferr = s.send(run); ferr != nil {
				break
			}
		}
		if n := len(items); n > 0 {
			after = items[n-1].Seq
		}
		if ferr != nil {
			return
		}
		if ferr := s.flush(); ferr != nil {
			return
		}
		if err != nil {
			if errors.Is(err, live.ErrOverflow) {
				end("slow_consumer", nil)
			} else {
				a.endStream(ctx, end, err)
			}
			return
		}
		select {
		case <-sub.Ready():
		case <-beat.C:
			s.buf.WriteString(": heartbeat\n\n")
		case <-ctx.Done():
			if err := context.Cause(ctx); isShutdown(err) {
				end("shutdown", err)
			}
			return
		}
	}
}

// endStream ends a stream on err: shutdown when serve stops or the log
// closed, nothing when the client went away, else error.
func (a *api) endStream(ctx context.Context, end func(string, error), err error) {
	switch {
	case isShutdown(context.Cause(ctx)):
		end("shutdown", context.Cause(ctx))
	case ctx.Err() != nil:
	case errors.Is(err, bucketlog.ErrClosed):
		end("shutdown", err)
	default:
		end("error", err)
	}
}
