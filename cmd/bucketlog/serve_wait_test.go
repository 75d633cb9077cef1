package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// serverTimeout is the read and write timeout of the in-process servers
// here: every wait below outlives it.
const serverTimeout = 300 * time.Millisecond

// liveServer serves a fresh one-shard log over loopback HTTP with short
// server timeouts.
func liveServer(t testing.TB, tune func(*api)) (string, *bucketlog.Log, *api, *httptest.Server) {
	t.Helper()
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(apiConfig{own: affinity.Ownership{Index: 0, Count: 1}})
	if tune != nil {
		tune(a)
	}
	a.setLog(l)
	ts := httptest.NewUnstartedServer(a)
	ts.Config.ReadTimeout, ts.Config.WriteTimeout = serverTimeout, serverTimeout
	ts.Config.RegisterOnShutdown(a.stopLive)
	ts.Start()
	t.Cleanup(func() { ts.Close(); l.Close() })
	return ts.URL, l, a, ts
}

func appendOne(t *testing.T, l *bucketlog.Log, payload string) uint64 {
	t.Helper()
	res, err := l.Append(context.Background(), localseg.Event{ExecutionID: "42", TransactionID: "t-" + payload, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	return res.Seq
}

type waitAnswer struct {
	wait string // the Bucketlog-Wait header
	code int
	body map[string]any
	err  error
}

func request(ctx context.Context, method, url string) waitAnswer {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return waitAnswer{err: err}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return waitAnswer{err: err}
	}
	defer resp.Body.Close()
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	return waitAnswer{wait: resp.Header.Get(waitHeader), code: resp.StatusCode, body: body, err: err}
}

// TestServeWaitWokenByAppendPastTimeouts: a scan, a per-execution read and
// a pull wait=2m each; the append comes after the server's read and write
// timeouts passed, and each answer carries it. Woken only by the timer
// (no wake-up on commit), they would answer the empty page after 2m.
func TestServeWaitWokenByAppendPastTimeouts(t *testing.T) {
	base, l, _, _ := liveServer(t, nil)
	appendOne(t, l, "first")
	urls := []string{
		"GET " + base + "/v1/events?after=1&wait=2m",
		"GET " + base + "/v1/executions/42/events?after=1&limit=5&wait=2m",
		"POST " + base + "/v1/consumers/c/pull?wait=2m",
	}
	// The consumer has read record 1: its pull waits for the next.
	if a := request(context.Background(), "POST", base+"/v1/consumers/c/pull"); a.code != 200 {
		t.Fatal(a)
	}
	if _, err := l.Ack(context.Background(), "c", 1); err != nil {
		t.Fatal(err)
	}
	answers := make([]waitAnswer, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			m, url, _ := strings.Cut(u, " ")
			answers[i] = request(context.Background(), m, url)
		})
	}
	time.Sleep(3 * serverTimeout)
	seq := appendOne(t, l, "second")
	wg.Wait()
	for i, a := range answers {
		if a.err != nil || a.code != 200 || a.wait != "ready" {
			t.Fatalf("%s: %d %v %v", urls[i], a.code, a.err, a.body)
		}
		recs, _ := a.body["records"].([]any)
		if len(recs) != 1 || recs[0].(map[string]any)["global_sequence"].(float64) != float64(seq) {
			t.Fatalf("%s answered %v, want record %d (the empty page means the wait was not woken by the commit)", urls[i], a.body, seq)
		}
	}
}

func TestServeWaitTimesOutEmpty(t *testing.T) {
	base, l, _, _ := liveServer(t, nil)
	appendOne(t, l, "only")
	a := request(context.Background(), "GET", base+"/v1/events?after=1&wait=100ms")
	if a.err != nil || a.code != 200 || a.wait != "timeout" || a.body["returned"].(float64) != 0 || a.body["record_count"].(float64) != 0 {
		t.Fatalf("timed-out wait answered %d %v %v, want the empty page", a.code, a.err, a.body)
	}
	// wait=0 is today's answer at once.
	if a := request(context.Background(), "GET", base+"/v1/events?after=0&wait=0s"); a.code != 200 || a.body["returned"].(float64) != 1 {
		t.Fatalf("wait=0: %v", a)
	}
}

func TestServeWaitRefusedOverFiveMinutes(t *testing.T) {
	base, _, _, _ := liveServer(t, nil)
	for _, q := range []string{"wait=6m", "wait=-1s", "wait=soon", "wait=1s&wait=2s"} {
		for _, u := range []string{"GET /v1/events?", "GET /v1/executions/42/events?", "POST /v1/consumers/c/pull?"} {
			m, path, _ := strings.Cut(u, " ")
			a := request(context.Background(), m, base+path+q)
			if a.code != 400 || a.body["class"] != "usage" || !strings.Contains(a.body["error"].(string), "wait") {
				t.Errorf("%s%s: %d %v, want 400 naming wait", u, q, a.code, a.body)
			}
		}
	}
	if a := request(context.Background(), "GET", base+"/v1/events?wait=6m"); !strings.Contains(a.body["error"].(string), "5m0s") {
		t.Errorf("the refusal does not name the bound: %v", a.body)
	}
}

// TestServeWaitEndsWhenClientGoes: the client's request is cancelled
// mid-wait; the handler returns (the server closes without waiting for a
// 2-minute wait) and no goroutine is left.
func TestServeWaitEndsWhenClientGoes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	base, l, _, ts := liveServer(t, nil)
	appendOne(t, l, "only")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan waitAnswer, 1)
	go func() { done <- request(ctx, "GET", base+"/v1/events?after=1&wait=2m") }()
	time.Sleep(serverTimeout)
	cancel()
	if a := <-done; a.err == nil {
		t.Fatalf("cancelled request answered %v", a)
	}
	closed := make(chan struct{})
	go func() { ts.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(hangGuard):
		t.Fatal("the server still holds the abandoned wait")
	}
	http.DefaultClient.CloseIdleConnections()
	l.Close()
}

// TestServeWaitReleasedAtShutdown: Shutdown (which serve calls on SIGTERM)
// answers a pending wait at once with 503 naming the shutdown, instead of
// holding the shutdown for the wait.
func TestServeWaitReleasedAtShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	base, l, _, ts := liveServer(t, nil)
	appendOne(t, l, "only")
	done := make(chan waitAnswer, 1)
	go func() { done <- request(context.Background(), "POST", base+"/v1/consumers/c/pull?wait=2m&limit=1") }()
	go func() { done <- request(context.Background(), "POST", base+"/v1/consumers/d/pull?wait=2m") }()
	// Both consumers have their record 1 acked only after they exist:
	// pull them once, ack, then their waits block.
	time.Sleep(serverTimeout)
	for range 2 {
		if a := <-done; a.code != 200 {
			t.Fatalf("first pull: %v", a)
		}
	}
	l.Ack(context.Background(), "c", 1)
	// A new connection for the wait: a pooled one from the first pulls may
	// be closed by the server's idle timeout (its read timeout) just as the
	// request goes out, which a POST does not retry.
	http.DefaultClient.CloseIdleConnections()
	go func() { done <- request(context.Background(), "POST", base+"/v1/consumers/c/pull?wait=2m") }()
	time.Sleep(serverTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := ts.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown held by the wait: %v", err)
	}
	a := <-done
	if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body["error"].(string), "shutting down") {
		t.Fatalf("wait at shutdown answered %d %v", a.code, a.body)
	}
	ts.Close()
	l.Close()
	http.DefaultClient.CloseIdleConnections()
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id, name, data string
}

// readEvent reads the next event, skipping comment lines.
func readEvent(br *bufio.Reader) (sseEvent, error) {
	var e sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return e, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if e.data != "" || e.name != "" {
				return e, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.data = line[6:]
		}
	}
}
