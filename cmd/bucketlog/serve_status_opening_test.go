package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
)

// TestServeStatusWhileOpening: before the engine is open (a long recovery
// or hydration), GET /v1/status answers 200 with the shard in state
// "opening", not ready and why, so an operator sees it; /readyz and the
// other /v1 routes still answer 503.
func TestServeStatusWhileOpening(t *testing.T) {
	a := newAPI(apiConfig{own: affinity.Ownership{Index: 1, Count: 2}})
	code, out := call(t, a, "GET", "/v1/status", "")
	if code != http.StatusOK || out["action"] != "status" {
		t.Fatalf("GET /v1/status while opening: %d %v", code, out)
	}
	shards, _ := out["shards"].([]any)
	if len(shards) != 1 {
		t.Fatalf("GET /v1/status while opening lists %v", out["shards"])
	}
	st, _ := shards[0].(map[string]any)
	if st["shard"] != 1.0 || st["state"] != "opening" || st["ready"] != false || st["reason"] == nil || st["reason"] == "" {
		t.Fatalf("the opening shard's status: %v", st)
	}
	if code, out := call(t, a, "GET", "/readyz", ""); code != http.StatusServiceUnavailable || out["ready"] != false {
		t.Fatalf("/readyz while opening: %d %v", code, out)
	}
	if code, _ := call(t, a, "GET", "/v1/events", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/events while opening: %d", code)
	}
	if code, out := call(t, a, "GET", "/v1/status?x=1", ""); code != http.StatusBadRequest {
		t.Fatalf("GET /v1/status with a query while opening: %d %v", code, out)
	}
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: t.TempDir(), ShardIndex: 1, ShardCount: 2, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a.setLog(l)
	if st := statusOf(t, a); st["state"] != "ready" || st["ready"] != true {
		t.Fatalf("status once open: %v", st)
	}
}
