package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
)

// gatedBody is a request body sent without Content-Length: head, then a
// wait for release, then tail. waiting counts the bodies that reached the
// wait (their head read).
type gatedBody struct {
	head, tail string
	release    <-chan struct{}
	waiting    *atomic.Int64
	waited     bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.head != "" {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if !b.waited {
		b.waiting.Add(1)
		<-b.release
		b.waited = true
	}
	if b.tail == "" {
		return 0, io.EOF
	}
	n := copy(p, b.tail)
	b.tail = b.tail[n:]
	return n, nil
}

// serveChunked runs one POST /v1/events with body through h (no
// Content-Length) and answers its recorder.
func serveChunked(h http.Handler, body *gatedBody) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/v1/events", body)
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestServeChunkedBodiesReserveWhatTheyRead: a body sent without
// Content-Length reserves the in-flight budget as its bytes arrive, not
// the whole --max-body-bytes up front, so 100 small chunked appends in
// flight at once are all taken (up front, the default 64 MiB budget held
// four). The bound on bytes in flight holds: a chunked body whose bytes
// pass the budget is refused midway with 503 and Retry-After, and every
// reservation is given back.
func TestServeChunkedBodiesReserveWhatTheyRead(t *testing.T) {
	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Run("small", func(t *testing.T) {
		a := newAPI(apiConfig{own: affinity.SingleOwner})
		a.setLog(l)
		const n = 100
		release := make(chan struct{})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		defer free()
		var waiting atomic.Int64
		codes := make(chan int, n)
		for i := range n {
			ev := eventJSON("1", fmt.Sprint("chunked-", i), "p")
			body := &gatedBody{head: ev[:len(ev)/2], tail: ev[len(ev)/2:], release: release, waiting: &waiting}
			go func() { codes <- serveChunked(a, body).Code }()
		}
		for deadline := time.Now().Add(hangGuard); waiting.Load() < n; time.Sleep(5 * time.Millisecond) {
			select {
			case code := <-codes:
				t.Fatalf("a small chunked append answered %d while %d were in flight (in-flight bytes %d)", code, waiting.Load(), a.inflight.Load())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d chunked bodies were read", waiting.Load(), n)
			}
		}
		if got := a.inflight.Load(); got <= 0 || got > n*bodyStep {
			t.Fatalf("%d chunked bodies in flight reserve %d bytes, want 1..%d", n, got, n*bodyStep)
		}
		free()
		for range n {
			if code := <-codes; code != http.StatusCreated {
				t.Fatalf("a small chunked append: %d", code)
			}
		}
		if got := a.inflight.Load(); got != 0 {
			t.Fatalf("in-flight bytes after every request finished: %d", got)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		const budget = 1 << 20
		a := newAPI(apiConfig{own: affinity.SingleOwner, maxBody: budget, maxInflight: budget})
		a.setLog(l)
		release := make(chan struct{})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		defer free()
		var waiting atomic.Int64
		ev := eventJSON("1", "held", "p")
		held := &gatedBody{head: strings.Repeat(" ", budget*7/8), tail: ev, release: release, waiting: &waiting}
		heldCode := make(chan int, 1)
		go func() { heldCode <- serveChunked(a, held).Code }()
		for deadline := time.Now().Add(hangGuard); waiting.Load() < 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the held body's bytes were never read")
			}
		}
		if got := a.inflight.Load(); got < budget*7/8 || got > budget {
			t.Fatalf("the held body read %d bytes and reserves %d, want %d..%d", budget*7/8, got, budget*7/8, budget)
		}
		open := make(chan struct{})
		close(open)
		over := &gatedBody{head: strings.Repeat(" ", budget/4), tail: eventJSON("1", "over", "p"), release: open, waiting: &waiting}
		rec := serveChunked(a, over)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"class":"storage"`) {
			t.Fatalf("a chunked body passing the in-flight budget: %d %s", rec.Code, rec.Body)
		}
		if got := a.inflight.Load(); got > budget {
			t.Fatalf("%d bytes reserved, over the budget %d", got, budget)
		}
		free()
		if code := <-heldCode; code != http.StatusCreated {
			t.Fatalf("the held chunked append: %d", code)
		}
		if got := a.inflight.Load(); got != 0 {
			t.Fatalf("in-flight bytes after every request finished: %d", got)
		}
	})
	t.Run("cap below a step", func(t *testing.T) {
		// A budget of one body under bodyStep still takes a chunked body
		// up to the cap and refuses one over it as too large.
		const limit = 1000
		a := newAPI(apiConfig{own: affinity.SingleOwner, maxBody: limit, maxInflight: limit})
		a.setLog(l)
		release := make(chan struct{})
		close(release)
		var waiting atomic.Int64
		ev := eventJSON("1", "at-cap", "p")
		at := &gatedBody{head: strings.Repeat(" ", limit-len(ev)), tail: ev, release: release, waiting: &waiting}
		if rec := serveChunked(a, at); rec.Code != http.StatusCreated {
			t.Fatalf("a chunked body of exactly the cap: %d %s", rec.Code, rec.Body)
		}
		over := &gatedBody{head: strings.Repeat(" ", limit+1-len(ev)), tail: ev, release: release, waiting: &waiting}
		if rec := serveChunked(a, over); rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("a chunked body one byte over the cap: %d %s", rec.Code, rec.Body)
		}
		if got := a.inflight.Load(); got != 0 {
			t.Fatalf("in-flight bytes after every request finished: %d", got)
		}
	})
}
