package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/internal/live"
)

// Waiting reads (serveAbout): ?wait=D on a scan, a per-execution read and
// a pull holds the request until the answer would carry a record or D
// passes (then the empty page), woken by the commits of appends.
const (
	// maxWait bounds ?wait=.
	maxWait = 5 * time.Minute
	// waitAnswerMargin is what a waited request may take to write its
	// answer after the wait: its deadlines are the wait plus this.
	waitAnswerMargin = time.Minute
	// waitHeader says how a wait ended: "ready" (a record is there, at
	// once or woken by a commit) or "timeout" (D passed: the empty page).
	waitHeader = "Bucketlog-Wait"
)

// errShuttingDown ends waits and streams when serve stops: the client is
// answered at once (503) rather than holding the shutdown.
var errShuttingDown = fmt.Errorf("%w: the server is shutting down; retry against its successor", bucketlog.ErrNotReady)

// liveState is what waits and streams share: serve's stop, and the
// stream limits (zero values take the defaults of serve_stream.go).
type liveState struct {
	once    sync.Once
	stopCtx context.Context
	stopFn  context.CancelCauseFunc

	buffer    int           // stream: records a subscriber may hold untaken
	heartbeat time.Duration // stream: comment lines this often
	stall     time.Duration // stream: a write that takes longer drops the subscriber

	hubOnce sync.Once
	hubv    *live.Hub // the streams' live hub (serve_stream.go)
}

func (s *liveState) init() {
	s.once.Do(func() { s.stopCtx, s.stopFn = context.WithCancelCause(context.Background()) })
}

// stopLive ends every wait and stream (serve registers it to run when the
// server shuts down, which would otherwise wait for them).
func (a *api) stopLive() {
	a.live.init()
	a.live.stopFn(errShuttingDown)
}

// liveCtx is r's context, also cancelled (with errShuttingDown) when
// serve stops.
func (a *api) liveCtx(r *http.Request) (context.Context, func()) {
	a.live.init()
	ctx, cancel := context.WithCancelCause(r.Context())
	stop := context.AfterFunc(a.live.stopCtx, func() { cancel(errShuttingDown) })
	return ctx, func() { stop(); cancel(nil) }
}

// takeWait removes ?wait=D from r's query (the handlers refuse unknown
// parameters) and parses it: a Go duration in 0..5m.
func takeWait(r *http.Request) (time.Duration, error) {
	q := r.URL.Query()
	vs, ok := q["wait"]
	if !ok {
		return 0, nil
	}
	if len(vs) != 1 {
		return 0, usagef("query parameter \"wait\" is given %d times", len(vs))
	}
	d, err := time.ParseDuration(vs[0])
	if err != nil || d < 0 || d > maxWait {
		return 0, usagef("wait=%q is not a Go duration in 0s..%v (such as 30s or 2m)", vs[0], maxWait)
	}
	q.Del("wait")
	r.URL.RawQuery = q.Encode()
	return d, nil
}

// probe says, without side effects, whether the answer of r would hold a
// record now. It returns nil when the request is to be answered at once
// (bad parameters, another shard's execution: the handler says why).
type probe func(r *http.Request, l *bucketlog.Log) func() (bool, error)

// waitable wraps a reading handler: with ?wait=D > 0 it first waits until
// p reports a record (or D passes), then lets h answer as it always does.
// The request's read and write deadlines are moved past the wait, so the
// server's timeouts do not cut it short.
func (a *api) waitable(h func(http.ResponseWriter, *http.Request, *bucketlog.Log), p probe) func(http.ResponseWriter, *http.Request, *bucketlog.Log) {
	return func(w http.ResponseWriter, r *http.Request, l *bucketlog.Log) {
		d, err := takeWait(r)
		if err != nil {
			writeError(w, nil, err)
			return
		}
		var ready func() (bool, error)
		if d > 0 {
			ready = p(r, l)
		}
		if ready == nil {
			h(w, r, l)
			return
		}
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(d + waitAnswerMargin)
		_ = rc.SetReadDeadline(deadline) // not every writer supports deadlines (tests' recorders)
		_ = rc.SetWriteDeadline(deadline)
		ctx, cancel := a.liveCtx(r)
		defer cancel()
		found := false
		_, err = live.Until(ctx, live.Closing(l.Store(), bucketlog.ErrClosed), d, func() (struct{}, bool, error) {
			ok, err := ready()
			found = ok
			return struct{}{}, ok, err
		})
		if found {
			w.Header().Set(waitHeader, "ready")
		} else {
			w.Header().Set(waitHeader, "timeout")
		}
		switch {
		case r.Context().Err() != nil:
			return // the client went away: nobody to answer
		case err != nil:
			writeError(w, nil, err)
			return
		}
		h(w, r, l)
	}
}

// scanProbe: a record after ?after=.
func scanProbe(r *http.Request, l *bucketlog.Log) func() (bool, error) {
	after, _, err := queryPage(r.URL.Query(), true)
	if err != nil {
		return nil
	}
	return func() (bool, error) {
		p, err := l.Store().Scan(after, 1)
		return len(p.Records) > 0, err
	}
}

// execProbe: a record of the execution after ?after= (owner only).
func (a *api) execProbe(r *http.Request, l *bucketlog.Log) func() (bool, error) {
	id, err := checkName("execution_id", r.PathValue("id"))
	if err != nil || a.own.OwnerOf(id) != a.own.Index {
		return nil
	}
	after, _, err := queryPage(r.URL.Query(), true)
	if err != nil {
		return nil
	}
	return func() (bool, error) {
		p, err := l.Store().ReadExecution(id, after, 1)
		return len(p.Records) > 0, err
	}
}

// pullProbe: a record after the consumer's cursor (0 for a consumer the
// pull will create). It reads the cursor without pulling, so a wait
// neither creates the consumer nor counts pulls; the pull after it does.
func pullProbe(r *http.Request, l *bucketlog.Log) func() (bool, error) {
	name, err := checkName("consumer", r.PathValue("name"))
	if err != nil {
		return nil
	}
	if _, _, err := queryPage(r.URL.Query(), false); err != nil {
		return nil
	}
	return func() (bool, error) {
		snap, err := l.Store().Snapshot()
		if err != nil {
			return false, err
		}
		p, err := l.Store().Scan(snap.Consumers[name], 1)
		return len(p.Records) > 0, err
	}
}

// isShutdown reports an error that ended a wait because serve stops.
func isShutdown(err error) bool { return errors.Is(err, errShuttingDown) }
