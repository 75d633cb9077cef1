package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/client"
)

// liveLog is an httptest server speaking the protocol for live
// reads, while branch live (the server side) is not on main:
// GET /v1/events?after=&limit=&wait=D answers as soon as a record lies
// beyond after (or empty when D passes), and GET /v1/events/stream is
// Server-Sent Events (id: the sequence, data: the record as in a scan),
// resumed by Last-Event-ID over after. dropAfter > 0 closes each stream
// connection after that many events, as a restart would.
type liveLog struct {
	mu        sync.Mutex
	recs      []client.Record
	grew      chan struct{}
	dropAfter int
	conns     int
	lastIDs   []string
	waits     []string
}

func newLiveLog() *liveLog { return &liveLog{grew: make(chan struct{})} }

func (l *liveLog) append(payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq := uint64(len(l.recs) + 1)
	l.recs = append(l.recs, client.Record{Sequence: seq, ExecutionID: "e", TransactionID: "t" + strconv.FormatUint(seq, 10), ByteLen: len(payload), Payload: payload})
	close(l.grew)
	l.grew = make(chan struct{})
}

// after returns the records after seq, or a channel closed on the next
// append.
func (l *liveLog) after(seq uint64) ([]client.Record, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if int(seq) < len(l.recs) {
		return append([]client.Record(nil), l.recs[seq:]...), nil
	}
	return nil, l.grew
}

func (l *liveLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	switch r.URL.Path {
	case "/v1/events":
		wait, _ := time.ParseDuration(q.Get("wait"))
		l.mu.Lock()
		l.waits = append(l.waits, q.Get("wait"))
		l.mu.Unlock()
		recs, grew := l.after(after)
		if recs == nil && wait > 0 {
			select {
			case <-grew:
			case <-time.After(wait):
			case <-r.Context().Done():
				return
			}
			recs, _ = l.after(after)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"action": "eventlog-scan", "exists": true, "base": 1,
			"record_count": len(recs), "returned": len(recs), "records": recs})
	case "/v1/events/stream":
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			after, _ = strconv.ParseUint(id, 10, 64)
		}
		l.mu.Lock()
		l.conns++
		l.lastIDs = append(l.lastIDs, r.Header.Get("Last-Event-ID"))
		l.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		fmt.Fprint(w, ": hello\n\n")
		_ = rc.Flush()
		sent := 0
		for {
			recs, grew := l.after(after)
			for _, rec := range recs {
				if l.dropAfter > 0 && sent == l.dropAfter {
					return
				}
				data, _ := json.Marshal(rec)
				fmt.Fprintf(w, "id: %d\ndata: %s\n\n", rec.Sequence, data)
				after, sent = rec.Sequence, sent+1
			}
			_ = rc.Flush()
			if recs == nil {
				select {
				case <-grew:
				case <-r.Context().Done():
					return
				}
			}
		}
	default:
		http.NotFound(w, r)
	}
}

// TestFollowLongPolls: Follow yields records appended while it waits,
// each once and in order, sending ?wait= and ?after= the last yielded.
func TestFollowLongPolls(t *testing.T) {
	l := newLiveLog()
	srv := httptest.NewServer(l)
	defer srv.Close()
	c := newClient(t, srv.URL, client.Options{})
	l.append("a")
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var got []uint64
	for rec, err := range c.Follow(ctx, client.FollowRequest{Wait: time.Minute}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec.Sequence)
		if len(got) == 5 {
			break
		}
		go l.append("next") // appended while Follow waits
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("Follow yielded %v, want 1..5", got)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.waits {
		if w != "1m0s" {
			t.Fatalf("a poll sent wait=%q, want 1m0s", w)
		}
	}
}

// TestScanWaitTimesOut: a long poll's attempt has its Wait on top of the
// attempt timeout: a server that answers an empty page after 200 ms is
// not cut off by a 10 ms attempt timeout when the poll waits 5 s.
func TestScanWaitTimesOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "5s" {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":"wait=%q","class":"usage"}`, r.URL.Query().Get("wait"))
			return
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `{"action":"eventlog-scan","exists":true,"base":1,"record_count":0,"returned":0,"records":[]}`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, client.Options{AttemptTimeout: 10 * time.Millisecond, Retry: client.Retry{MaxAttempts: 2}})
	p, err := c.Scan(context.Background(), client.ReadRequest{Wait: 5 * time.Second})
	if err != nil || len(p.Records) != 0 || !p.Exists {
		t.Fatalf("scan: %+v, %v (want an empty page: the attempt's timeout has the wait on top)", p, err)
	}
}

// TestStreamResumesWithLastEventID: the server drops the stream every 3
// events; Stream reconnects with Last-Event-ID and yields 1..10 once each.
func TestStreamResumesWithLastEventID(t *testing.T) {
	l := newLiveLog()
	l.dropAfter = 3
	srv := httptest.NewServer(l)
	defer srv.Close()
	for i := range 10 {
		l.append(strconv.Itoa(i))
	}
	c := newClient(t, srv.URL, client.Options{Retry: client.Retry{InitialDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var got []uint64
	for rec, err := range c.Stream(ctx, client.StreamRequest{}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Payload != strconv.Itoa(int(rec.Sequence)-1) {
			t.Fatalf("record %+v", rec)
		}
		got = append(got, rec.Sequence)
		if len(got) == 10 {
			break
		}
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("Stream yielded %v, want 1..10", got)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns < 4 || l.lastIDs[0] != "" || l.lastIDs[1] != "3" || l.lastIDs[2] != "6" {
		t.Fatalf("connections %d with Last-Event-ID %q, want 4 resuming at 3, 6, 9", l.conns, l.lastIDs)
	}
}

// TestStreamLive: records appended after the stream opened arrive; the
// end of ctx ends the iteration with ctx's error.
func TestStreamLive(t *testing.T) {
	l := newLiveLog()
	srv := httptest.NewServer(l)
	defer srv.Close()
	c := newClient(t, srv.URL, client.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.append("first")
	var got []uint64
	var last error
	for rec, err := range c.Stream(ctx, client.StreamRequest{}) {
		if err != nil {
			last = err
			break
		}
		got = append(got, rec.Sequence)
		if len(got) == 2 {
			cancel()
			continue
		}
		go l.append("second")
	}
	if len(got) != 2 || !errors.Is(last, context.Canceled) {
		t.Fatalf("got %v, ended by %v (want 1, 2, then context.Canceled)", got, last)
	}
}

// TestStreamRefusalEnds: a 4xx refusal of the stream is yielded with its
// class and ends the iteration (not retried).
func TestStreamRefusalEnds(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.WriteHeader(421)
		fmt.Fprint(w, `{"error":"elsewhere","class":"not_owner","owner_shard":3}`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, client.Options{})
	n := 0
	for _, err := range c.Stream(context.Background(), client.StreamRequest{ExecutionID: "x"}) {
		n++
		if owner, ok := client.OwnerShard(err); !ok || owner != 3 || !errors.Is(err, bucketlog.ErrNotOwner) {
			t.Fatalf("stream refusal: %v", err)
		}
	}
	if n != 1 || calls != 1 {
		t.Fatalf("%d yields, %d requests (want 1, 1)", n, calls)
	}
}

// TestStreamEndEvent: serve ends a stream with an "end" event; one whose
// reason is error with a class that is not transient (here invariant) is
// yielded with the class and ends the iteration, after the records sent
// before it; a shutdown or slow_consumer end reconnects (the restart
// test, live_serve_test.go). Ignoring the end event would reconnect
// until the attempts run out and lose the class.
func TestStreamEndEvent(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: start\ndata: {\"after\":0,\"base\":1,\"clamped\":false,\"tip\":1}\n\n")
		fmt.Fprint(w, "id: 1\ndata: {\"global_sequence\":1,\"execution_id\":\"e\",\"transaction_id\":\"t\",\"byte_len\":1,\"payload\":\"p\"}\n\n")
		fmt.Fprint(w, "event: end\ndata: {\"reason\":\"error\",\"error\":\"a frame does not check\",\"class\":\"invariant\",\"resume_after\":1}\n\n")
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, client.Options{Retry: client.Retry{MaxAttempts: 3, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond}})
	var got []uint64
	var last error
	for rec, err := range c.Stream(context.Background(), client.StreamRequest{}) {
		if err != nil {
			last = err
			break
		}
		got = append(got, rec.Sequence)
	}
	if len(got) != 1 || !errors.Is(last, bucketlog.ErrInvariant) || calls != 1 {
		t.Fatalf("got %v, ended by %v after %d requests (want 1, then ErrInvariant, 1 request)", got, last, calls)
	}
}
