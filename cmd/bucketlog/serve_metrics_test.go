package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
)

// TestServeCountsRefusalsAndRequests: six appends refused with 400 before
// the engine sees them show in eventlog_ops_total{operation="append",
// outcome="invalid_input"}, beside the engine's own refusals; every
// request is counted by route pattern, method and status class, a request
// no route takes under "unmatched" (the label set stays bounded).
func TestServeCountsRefusalsAndRequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newAPI(apiConfig{own: affinity.Ownership{Index: 0, Count: 2}, gatherer: reg})
	if err := instrumentAPI(a, reg, 0); err != nil {
		t.Fatal(err)
	}
	if code, _ := call(t, a, "POST", "/v1/events", eventJSON("1", "t", "p")); code != http.StatusServiceUnavailable {
		t.Fatalf("append before open: %d", code)
	}
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: t.TempDir(), ShardIndex: 0, ShardCount: 2, Registerer: reg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a.setLog(l)
	mine, theirs := ownedIDs(0, 2, 1)[0], ownedIDs(1, 2, 1)[0]
	for _, body := range []string{`{"execution_id":`, `[1]`, `{"events":[]}`, eventJSON("a/b", "t", "p"),
		eventJSON(mine, " ", "p"), `{"execution_id":"` + mine + `","transaction_id":"t","payload":"p","Payload":"q"}`} {
		if code, out := call(t, a, "POST", "/v1/events", body); code != http.StatusBadRequest {
			t.Fatalf("append %s: %d %v", body, code, out)
		}
	}
	if code, _ := call(t, a, "POST", "/v1/events", eventJSON(theirs, "t", "p")); code != http.StatusMisdirectedRequest {
		t.Fatalf("append not owned: %d", code)
	}
	if code, _ := call(t, a, "POST", "/v1/events", eventJSON(mine, "t", "p")); code != http.StatusCreated {
		t.Fatalf("append: %d", code)
	}
	call(t, a, "GET", "/nowhere/"+strings.Repeat("x", 8), "")
	call(t, a, "PUT", "/v1/events", "")

	ops := func(outcome string) float64 {
		return testutil.ToFloat64(mustVec(t, reg, "bucketlog_eventlog_ops_total", map[string]string{"shard": "0", "operation": "append", "outcome": outcome}))
	}
	if got := ops("invalid_input"); got != 6 {
		t.Errorf("appends refused as invalid_input: %v, want 6", got)
	}
	if got, want := ops("not_owner"), 1.0; got != want {
		t.Errorf("appends refused as not_owner: %v, want %v", got, want)
	}
	if got := ops("storage"); got != 1 {
		t.Errorf("appends refused while opening (storage): %v, want 1", got)
	}
	if got := ops("ok"); got != 1 {
		t.Errorf("appends ok: %v, want 1", got)
	}
	req := func(route, method, code string) float64 {
		return testutil.ToFloat64(mustVec(t, reg, "bucketlog_http_requests_total", map[string]string{"route": route, "method": method, "code": code}))
	}
	if got := req("/v1/events", "POST", "4xx"); got != 7 {
		t.Errorf("POST /v1/events 4xx: %v, want 7", got)
	}
	if got := req("/v1/events", "POST", "5xx") + req("/v1/events", "POST", "2xx"); got != 2 {
		t.Errorf("POST /v1/events 2xx+5xx: %v, want 2", got)
	}
	if got := req("unmatched", "other", "4xx"); got != 2 {
		t.Errorf("unmatched 4xx: %v, want 2 (a 404 and a 405)", got)
	}
}

// mustVec finds the one series of family name with exactly labels.
func mustVec(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			v := m.GetCounter().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x", Help: "x"}, func() float64 { return v })
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return nil
}
