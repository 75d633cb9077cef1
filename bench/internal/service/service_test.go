package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestEventJSON(t *testing.T) {
	b := EventJSON([]byte("x"), "exec-1", "c0-1", []byte("abc"))
	var ev map[string]string
	if err := json.Unmarshal(b[1:], &ev); err != nil || ev["execution_id"] != "exec-1" || ev["transaction_id"] != "c0-1" || ev["payload"] != "abc" || len(ev) != 3 {
		t.Fatalf("EventJSON: %s: %v %v", b, ev, err)
	}
}

// TestPostCounts: a batch counts what the answer says was appended, and
// an answer other than 201 (a duplicate's 200 included) is an error, so a
// cell cannot count an append the server did not write.
func TestPostCounts(t *testing.T) {
	status, answer := http.StatusCreated, `{"action":"append_batch","appended":37,"first_sequence":1}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	ctx := context.Background()
	if n, err := Post(ctx, srv.Client(), srv.URL, []byte(`{}`), true); err != nil || n != 37 {
		t.Fatalf("batch: %d %v", n, err)
	}
	if n, err := Post(ctx, srv.Client(), srv.URL, []byte(`{}`), false); err != nil || n != 1 {
		t.Fatalf("single: %d %v", n, err)
	}
	status = http.StatusOK // RED control: nothing was written
	if _, err := Post(ctx, srv.Client(), srv.URL, []byte(`{}`), false); err == nil {
		t.Fatal("a 200 (duplicate) answer was counted")
	}
	status, answer = http.StatusCreated, `{"action":"append_batch"}`
	if _, err := Post(ctx, srv.Client(), srv.URL, []byte(`{}`), true); err == nil || !strings.Contains(err.Error(), "appended") {
		t.Fatalf("a batch answer without appended: %v", err)
	}
}

// TestLoopCounts: the loop counts only acknowledged requests, stops at the
// first error and reports it.
func TestLoopCounts(t *testing.T) {
	res, err := Loop(context.Background(), 4, 20*time.Millisecond, func(_ context.Context, _ int, _ uint64) (int, error) {
		time.Sleep(time.Millisecond)
		return 3, nil
	})
	if err != nil || res.Events != 3*res.Ops || res.Ops == 0 || uint64(len(res.Lat)) != res.Ops {
		t.Fatalf("loop: %+v %v", res, err)
	}
	res, err = Loop(context.Background(), 2, time.Second, func(_ context.Context, i int, n uint64) (int, error) {
		if n == 2 {
			return 0, context.Canceled
		}
		return 1, nil
	})
	if err == nil || res.Events != res.Ops || res.Ops > 4 {
		t.Fatalf("failing op: %+v %v", res, err)
	}
}
