package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// openStream opens a stream and reads its start event.
func openStream(t *testing.T, url, lastID string) (*http.Response, *bufio.Reader, streamStart) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	e, err := readEvent(br)
	if err != nil || e.name != "start" {
		t.Fatalf("first event %+v, %v; want start", e, err)
	}
	var st streamStart
	if err := json.Unmarshal([]byte(e.data), &st); err != nil {
		t.Fatal(err)
	}
	return resp, br, st
}

func nextRecord(t *testing.T, br *bufio.Reader) (sseEvent, record) {
	t.Helper()
	e, err := readEvent(br)
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	var r record
	if e.name == "" {
		if err := json.Unmarshal([]byte(e.data), &r); err != nil {
			t.Fatal(err)
		}
	}
	return e, r
}

// TestServeStreamHistoryThenLive: history, then a record appended while
// the stream waits, each an event with id: its sequence; past the
// server's read and write timeouts.
func TestServeStreamHistoryThenLive(t *testing.T) {
	base, l, _, _ := liveServer(t, nil)
	for i := range 3 {
		appendOne(t, l, fmt.Sprint("h", i))
	}
	resp, br, st := openStream(t, base+"/v1/events/stream?after=1", "")
	if st.After != 1 || st.Base != 1 || st.Clamped {
		t.Fatalf("start %+v", st)
	}
	if len(resp.TransferEncoding) != 0 || !resp.Close {
		// A chunked stream costs each write a chunk header and trailer.
		t.Fatalf("stream body %v (close %v), want unchunked, to the connection's close", resp.TransferEncoding, resp.Close)
	}
	for want := uint64(2); want <= 3; want++ {
		e, r := nextRecord(t, br)
		if e.id != fmt.Sprint(want) || r.GlobalSequence != want || r.ByteLen != 2 {
			t.Fatalf("event %+v record %+v, want %d", e, r, want)
		}
	}
	time.Sleep(3 * serverTimeout) // the stream outlives the server's read and write timeouts
	seq := appendOne(t, l, "live")
	e, r := nextRecord(t, br)
	if e.id != fmt.Sprint(seq) || r.Payload != "live" {
		t.Fatalf("live event %+v %+v", e, r)
	}
	// The per-execution stream: the same records of execution 42.
	_, br2, _ := openStream(t, base+"/v1/executions/42/events/stream?after=3", "")
	if e, r := nextRecord(t, br2); r.Payload != "live" || e.id != "4" {
		t.Fatalf("execution stream %+v %+v", e, r)
	}
}

// TestServeStreamSlowConsumerBounded: a subscriber that stops reading
// does not block appends (thousands of events, far more than the
// sockets hold, all acknowledged while it reads nothing); when it reads
// again it gets what was on its way, then an end event slow_consumer
// with where to resume, and the stream closes. An unbounded backlog would
// stream every record instead.
func TestServeStreamSlowConsumerBounded(t *testing.T) {
	base, l, _, _ := liveServer(t, func(a *api) { a.live.buffer = 100 })
	appendOne(t, l, "x")
	_, br, _ := openStream(t, base+"/v1/events/stream", "")
	if _, r := nextRecord(t, br); r.GlobalSequence != 1 {
		t.Fatal(r)
	}
	big := strings.Repeat("p", 4096)
	const batches, per = 20, 200
	for i := range batches {
		evs := make([]localseg.Event, per)
		for j := range evs {
			evs[j] = localseg.Event{ExecutionID: "42", TransactionID: fmt.Sprint("b", i, "-", j), Payload: big}
		}
		if _, err := l.AppendBatch(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for {
		e, _ := nextRecord(t, br)
		if e.name == "end" {
			var end streamEnd
			json.Unmarshal([]byte(e.data), &end)
			if end.Reason != "slow_consumer" || end.ResumeAfter != uint64(1+got) {
				t.Fatalf("end %+v after %d records", end, got)
			}
			break
		}
		got++
		if got == batches*per {
			t.Fatalf("all %d records streamed to a subscriber %d behind: the backlog is not bounded", got, batches*per)
		}
	}
	if _, err := readEvent(br); err == nil {
		t.Fatal("the stream goes on after its end event")
	}
}

// TestServeStreamResumeAcrossRestart: a real serve process streams,
// stops (the stream ends with reason shutdown), starts again on the same
// directory, and a reconnect with Last-Event-ID (which overrides after=)
// continues right after the last event seen.
func TestServeStreamResumeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "--dir", dir)
	for i := 1; i <= 5; i++ {
		if code := do(t, "POST", s.base+"/v1/events", eventJSON("42", fmt.Sprint("t", i), fmt.Sprint("p", i)), nil); code != 201 {
			t.Fatal(code)
		}
	}
	_, br, _ := openStream(t, s.base+"/v1/events/stream?after=0", "")
	var last string
	for range 3 {
		e, _ := nextRecord(t, br)
		last = e.id
	}
	for range 2 {
		nextRecord(t, br)
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr)
	}
	if e, _ := nextRecord(t, br); e.name != "end" || !strings.Contains(e.data, `"reason":"shutdown"`) {
		t.Fatalf("stream at shutdown: %+v", e)
	}
	s2 := startServer(t, "--dir", dir)
	defer s2.stop(syscall.SIGTERM)
	_, br2, st := openStream(t, s2.base+"/v1/events/stream?after=0", last)
	if st.After != 3 {
		t.Fatalf("start %+v: Last-Event-ID %s not taken over after=0", st, last)
	}
	e, r := nextRecord(t, br2)
	if e.id != "4" || r.Payload != "p4" {
		t.Fatalf("resumed at %+v %+v, want 4", e, r)
	}
}

// TestServeStreamReclaimedStart: a stream from below the reclaim base
// starts, as a scan would, at the base: its start event says base and
// clamped, and its first record is the base.
func TestServeStreamReclaimedStart(t *testing.T) {
	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), SegmentMaxBytes: 1024, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 60 {
		appendOne(t, l, fmt.Sprintf("payload-%03d-%s", i, strings.Repeat("x", 40)))
	}
	if _, err := l.GC(ctx, bucketlog.GCRequest{MinRetainedSegments: 1, MaxRetainedSegments: 1}); err != nil {
		t.Fatal(err)
	}
	scan, err := l.Scan(ctx, 0, 1)
	if err != nil || !scan.Clamped || scan.Base <= 1 {
		t.Fatalf("the log was not reclaimed: %+v %v", scan, err)
	}
	a := newAPI(apiConfig{own: affinity.Ownership{Index: 0, Count: 1}})
	a.setLog(l)
	ts := httptest.NewServer(a)
	defer ts.Close()
	resp, br, st := openStream(t, ts.URL+"/v1/events/stream?after=0", "")
	defer resp.Body.Close() // before ts.Close, which waits for the stream
	if !st.Clamped || st.Base != scan.Base || st.After != 0 {
		t.Fatalf("start %+v, want base %d clamped", st, scan.Base)
	}
	if e, r := nextRecord(t, br); r.GlobalSequence != scan.Base || e.id != fmt.Sprint(scan.Base) {
		t.Fatalf("first record %+v, want the base %d", r, scan.Base)
	}
}
