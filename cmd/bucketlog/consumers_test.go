package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
)

// TestServeConsumersListing: GET /v1/consumers lists each consumer's
// cursor, pending count and whether it holds GC back; GET
// /v1/consumers/{name} shows one, and an unknown one is 404 and not created.
func TestServeConsumersListing(t *testing.T) {
	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)
	if code, out := call(t, a, "GET", "/v1/consumers", ""); code != 200 || fmt.Sprint(out["consumers"]) != "[]" {
		t.Fatalf("empty listing: %d %v", code, out)
	}
	for i := 1; i <= 3; i++ {
		call(t, a, "POST", "/v1/events", eventJSON("1", fmt.Sprint("t", i), "p"))
	}
	if code, out := call(t, a, "POST", "/v1/consumers/slow/pull?limit=1", ""); code != 200 || out["created_consumer"] != true {
		t.Fatalf("pull: %d %v", code, out)
	}
	call(t, a, "POST", "/v1/consumers/fast/pull", "")
	if code, out := call(t, a, "POST", "/v1/consumers/fast/ack", `{"sequence":3}`); code != 200 {
		t.Fatalf("ack: %d %v", code, out)
	}
	code, out := call(t, a, "GET", "/v1/consumers", "")
	want := "[map[acked_sequence:3 consumer:fast holds_gc_back:false pending_count:0] map[acked_sequence:0 consumer:slow holds_gc_back:true pending_count:3]]"
	if code != 200 || fmt.Sprint(out["consumers"]) != want || out["log_record_count"] != 3.0 || out["action"] != "eventlog-consumers" {
		t.Fatalf("listing: %d %v", code, out)
	}
	if code, out := call(t, a, "GET", "/v1/consumers/slow", ""); code != 200 || out["pending_count"] != 3.0 || out["holds_gc_back"] != true || out["action"] != "eventlog-consumer" {
		t.Fatalf("one consumer: %d %v", code, out)
	}
	if code, out := call(t, a, "GET", "/v1/consumers/nobody", ""); code != http.StatusNotFound || out["class"] != "invalid_state" {
		t.Fatalf("unknown consumer: %d %v", code, out)
	}
	if snap, _ := l.Store().Snapshot(); len(snap.Consumers) != 2 {
		t.Fatalf("a GET created a consumer: %v", snap.Consumers)
	}
	if code, _ := call(t, a, "GET", "/v1/consumers?x=1", ""); code != http.StatusBadRequest {
		t.Fatalf("unknown query parameter: %d", code)
	}
}

// TestCLIConsumers: the consumers command lists a shard's consumers, read
// only; --consumer shows one; an unknown one exits 3.
func TestCLIConsumers(t *testing.T) {
	dir := seeded(t)
	r := ok(t, nil, "tail", "--dir", dir, "--consumer", "c1", "--limit", "1")
	if r.obj["created_consumer"] != true {
		t.Fatalf("tail:\n%s", r)
	}
	r = ok(t, nil, "consumers", "--dir", dir)
	cs, _ := r.obj["consumers"].([]any)
	if len(cs) != 1 || cs[0].(map[string]any)["consumer"] != "c1" || fmt.Sprint(cs[0].(map[string]any)["pending_count"]) != "2" ||
		cs[0].(map[string]any)["holds_gc_back"] != true {
		t.Fatalf("consumers:\n%s", r)
	}
	if r = ok(t, nil, "consumers", "--dir", dir, "--consumer", "c1"); r.obj["action"] != "eventlog-consumer" || r.num(t, "acked_sequence") != 0 {
		t.Fatalf("consumers --consumer:\n%s", r)
	}
	runCLI(t, nil, "consumers", "--dir", dir, "--consumer", "nobody").want(t, 3, "invalid_state")
}
