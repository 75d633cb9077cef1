package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle HTTP client connections and gocloud's OpenCensus worker are
		// not the example's and end with the process.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// TestRun runs the self-contained scenario as `go run ./examples/restore`
// does, on shard 0 and on shard 2 of a pool of 3.
func TestRun(t *testing.T) {
	for _, shard := range []int{0, 2} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
		var out bytes.Buffer
		err := run(ctx, config{shard: shard, dir: t.TempDir()}, &out)
		cancel()
		if err != nil {
			t.Fatalf("shard %d: %v\n%s", shard, err, out.String())
		}
		for _, want := range []string{"events 1..500 (500 events", "consumer billing at sequence 100", "continues at sequence 501", "nothing lost"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("shard %d: the output lacks %q:\n%s", shard, want, out.String())
			}
		}
	}
}

// TestCheckCatchesLoss is the RED control of the scenario's verdict: a
// restore missing an event, or with one payload changed, or with the
// consumer's cursor lost, is not "nothing lost".
func TestCheckCatchesLoss(t *testing.T) {
	want := map[uint64]string{1: "a", 2: "b", 3: "c"}
	good := recovered{Events: 3, First: 1, Last: 3, Consumers: map[string]uint64{"billing": 100}, payloads: map[uint64]string{1: "a", 2: "b", 3: "c"}}
	if err := check(good, want); err != nil {
		t.Fatalf("a faithful restore: %v", err)
	}
	for name, bad := range map[string]func(r *recovered){
		"missing event":   func(r *recovered) { r.Events, r.Last = 2, 2; delete(r.payloads, 3) },
		"changed payload": func(r *recovered) { r.payloads[2] = "B" },
		"cursor lost":     func(r *recovered) { r.Consumers = map[string]uint64{} },
	} {
		r := good
		r.payloads = map[uint64]string{1: "a", 2: "b", 3: "c"}
		bad(&r)
		if err := check(r, want); err == nil {
			t.Errorf("%s: not detected", name)
		}
	}
}
