package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
)

// TestServeConsumerLimit: a pull that would create a consumer beyond the
// limit answers 409 naming it and creates nothing; existing consumers are
// served; --max-consumers outside 1..50000 is a usage error.
func TestServeConsumerLimit(t *testing.T) {
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: t.TempDir(), MaxConsumers: 2, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)
	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t1", "a")); code != http.StatusCreated {
		t.Fatalf("append: %d %v", code, out)
	}
	for _, c := range []string{"c1", "c2"} {
		if code, out := call(t, a, "POST", "/v1/consumers/"+c+"/pull", ""); code != 200 || out["created_consumer"] != true {
			t.Fatalf("pull %s: %d %v", c, code, out)
		}
	}
	code, out := call(t, a, "POST", "/v1/consumers/c3/pull", "")
	if code != http.StatusConflict || out["class"] != "invalid_state" || !strings.Contains(out["error"].(string), "limit") {
		t.Fatalf("pull beyond the limit: %d %v", code, out)
	}
	if code, out := call(t, a, "POST", "/v1/consumers/c1/pull", ""); code != 200 || out["created_consumer"] != false {
		t.Fatalf("existing consumer: %d %v", code, out)
	}
	if snap, _ := l.Store().Snapshot(); len(snap.Consumers) != 2 {
		t.Fatalf("consumers %v", snap.Consumers)
	}
	for _, n := range []string{"0", "50001"} {
		runCLI(t, nil, "serve", "--dir", t.TempDir(), "--max-consumers", n).want(t, 2, "usage")
	}
}
