package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/client"
)

// The live reads against a real serve process (the stand-in of
// live_test.go only speaks the protocol as the issue words it).

// TestServeWaitReturnsOnAppend: a scan with Wait of a minute, sent
// before anything is appended, is still waiting a moment later (a server
// ignoring ?wait= would answer the empty page at once) and answers with
// the record once it is appended; Follow yields records appended while it
// waits, each once and in order.
func TestServeWaitReturnsOnAppend(t *testing.T) {
	p := startServe(t, "--dir", t.TempDir())
	c := newClient(t, p.base, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	type answer struct {
		p   client.Page
		err error
	}
	got := make(chan answer, 1)
	go func() {
		pg, err := c.Scan(ctx, client.ReadRequest{Wait: time.Minute})
		got <- answer{pg, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("a scan with wait=1m on an empty log answered at once: %+v, %v", a.p, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := c.Append(ctx, client.Event{ExecutionID: "e", Payload: "one"}); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || len(a.p.Records) != 1 || a.p.Records[0].Payload != "one" {
		t.Fatalf("the waiting scan answered %+v, %v", a.p, a.err)
	}

	var seen []string
	done := make(chan error, 1)
	step := make(chan struct{}, 10)
	go func() {
		for rec, err := range c.Follow(ctx, client.FollowRequest{After: 1, Wait: time.Minute}) {
			if err != nil {
				done <- err
				return
			}
			seen = append(seen, rec.Payload)
			step <- struct{}{}
			if len(seen) == 3 {
				done <- nil
				return
			}
		}
	}()
	for i := range 3 {
		if _, err := c.Append(ctx, client.Event{ExecutionID: "e", Payload: fmt.Sprint("f", i)}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-step:
		case err := <-done:
			if err != nil || i < 2 {
				t.Fatalf("follow ended after %v: %v", seen, err)
			}
			done <- nil
		}
	}
	if err := <-done; err != nil || !slices.Equal(seen, []string{"f0", "f1", "f2"}) {
		t.Fatalf("follow yielded %v, %v", seen, err)
	}
	// A wait above the server's bound is a usage error, not retried.
	for _, err := range c.Follow(ctx, client.FollowRequest{Wait: 6 * time.Minute}) {
		if !errors.Is(err, bucketlog.ErrUsage) {
			t.Fatalf("follow with wait=6m: %v, want errors.Is ErrUsage", err)
		}
		break
	}
}

// switchProxy is a reverse proxy in front of serve whose target moves
// with each restart (a new port), recording each stream request's
// Last-Event-ID; while no serve is up it answers 502.
type switchProxy struct {
	target  atomic.Pointer[url.URL]
	mu      sync.Mutex
	lastIDs []string
}

func newSwitchProxy(t *testing.T) (*switchProxy, string) {
	sp := &switchProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(sp.target.Load())
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stream") {
			sp.mu.Lock()
			sp.lastIDs = append(sp.lastIDs, r.Header.Get("Last-Event-ID"))
			sp.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return sp, srv.URL
}

func (sp *switchProxy) point(base string) {
	u, _ := url.Parse(base)
	sp.target.Store(u)
}

func (sp *switchProxy) ids() []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return slices.Clone(sp.lastIDs)
}

// TestServeStreamLiveAndResumesAcrossRestart: Stream yields the history
// and then records as they are appended; serve stops (SIGTERM: the
// stream ends with reason shutdown) and starts again on the same
// directory; the iterator reconnects by itself with Last-Event-ID the
// last record it yielded and goes on with the next, every record once
// and in order.
func TestServeStreamLiveAndResumesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	sp, base := newSwitchProxy(t)
	p := startServe(t, "--dir", dir)
	sp.point(p.base)
	direct := newClient(t, p.base, client.Options{})
	c := newClient(t, base, client.Options{Retry: client.Retry{MaxAttempts: -1, InitialDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for i := 1; i <= 2; i++ {
		if _, err := direct.Append(ctx, client.Event{ExecutionID: "e", Payload: fmt.Sprint("r", i)}); err != nil {
			t.Fatal(err)
		}
	}
	recs := make(chan client.Record, 10)
	ended := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for rec, err := range c.Stream(sctx, client.StreamRequest{}) {
			if err != nil {
				ended <- err
				return
			}
			recs <- rec
		}
	}()
	next := func(want uint64) {
		t.Helper()
		select {
		case r := <-recs:
			if r.Sequence != want || r.Payload != fmt.Sprint("r", want) {
				t.Fatalf("stream yielded %+v, want sequence %d", r, want)
			}
		case err := <-ended:
			t.Fatalf("stream ended waiting for %d: %v", want, err)
		case <-ctx.Done():
			t.Fatalf("no record %d", want)
		}
	}
	next(1)
	next(2)
	if _, err := direct.Append(ctx, client.Event{ExecutionID: "e", Payload: "r3"}); err != nil {
		t.Fatal(err)
	}
	next(3) // live
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p2 := startServe(t, "--dir", dir)
	sp.point(p2.base)
	direct = newClient(t, p2.base, client.Options{})
	if _, err := direct.Append(ctx, client.Event{ExecutionID: "e", Payload: "r4"}); err != nil {
		t.Fatal(err)
	}
	next(4)
	stop()
	select {
	case r := <-recs:
		t.Fatalf("a record again after the restart: %+v", r)
	default:
	}
	ids := sp.ids()
	if len(ids) < 2 || ids[0] != "" || ids[len(ids)-1] != "3" {
		t.Fatalf("the stream requests sent Last-Event-ID %q; want none first, 3 on the reconnect", ids)
	}
}

// TestServeStreamNotOwnerAndClasses: a stream of another shard's
// execution is a 421 yielded at once (not retried), with the owner shard,
// errors.Is ErrNotOwner, and an *affinity.NotOwnerError naming both the
// owner and the shard that answered; a malformed execution id is the
// engine's class, not retried either.
func TestServeStreamNotOwnerAndClasses(t *testing.T) {
	p := startServe(t, "--dir", t.TempDir(), "--shard-index", "1", "--shard-count", "4")
	c := newClient(t, p.base, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	own := affinity.Ownership{Index: 1, Count: 4}
	id := ""
	for i := 0; id == ""; i++ {
		if cand := fmt.Sprintf("exec-%d", i); own.OwnerOf(cand) != 1 {
			id = cand
		}
	}
	want := own.OwnerOf(id)
	n := 0
	for _, err := range c.Stream(ctx, client.StreamRequest{ExecutionID: id}) {
		n++
		if o, ok := client.OwnerShard(err); !ok || o != want || !errors.Is(err, bucketlog.ErrNotOwner) {
			t.Fatalf("stream elsewhere: %v (owner %d %v, want %d)", err, o, ok, want)
		}
		if o, ok := bucketlog.OwnerShard(err); !ok || o != want {
			t.Fatalf("bucketlog.OwnerShard: %d %v", o, ok)
		}
		var noe *affinity.NotOwnerError
		if !errors.As(err, &noe) || noe.Owner != want || noe.Shard != 1 || noe.ExecutionID != id {
			t.Fatalf("errors.As NotOwnerError: %+v, want owner %d, shard 1, execution %q", noe, want, id)
		}
	}
	if n != 1 {
		t.Fatalf("the 421 was yielded %d times", n)
	}
	// The same on an append: the replica's shard is named.
	_, err := c.Append(ctx, client.Event{ExecutionID: id, Payload: "x"})
	var noe *affinity.NotOwnerError
	if !errors.As(err, &noe) || noe.Shard != 1 || noe.Owner != want {
		t.Fatalf("append elsewhere: %+v (%v)", noe, err)
	}
	for _, err := range c.Stream(ctx, client.StreamRequest{ExecutionID: strings.Repeat("x", 300)}) {
		if err == nil || !(errors.Is(err, bucketlog.ErrInvalidInput) || errors.Is(err, bucketlog.ErrUsage)) || errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("stream of a malformed id: %v", err)
		}
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
			t.Fatalf("stream of a malformed id: %v, want a 400", err)
		}
	}
}
