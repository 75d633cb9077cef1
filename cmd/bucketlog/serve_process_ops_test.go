package main

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond every 20 ms until it holds (hangGuard bounds it).
func waitFor(t *testing.T, s *server, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never %s; stderr:\n%s", what, s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeProcessBucketOutage: a real serve process whose bucket goes
// away keeps answering appends with 201 and /readyz with 200, reports the
// outage in /v1/status (degraded) and with one WARN line for the streak
// (not one per failed put), and logs an INFO when the bucket is back; then
// SIGTERM exits 0 with everything shipped.
func TestServeProcessBucketOutage(t *testing.T) {
	fb := newFlakyBucket(t, "outage")
	s := startServer(t, "--dir", t.TempDir(), "--bucket", fb.url, "--tail-interval", "100ms")
	fb.down.Store(true)
	for i := range 10 {
		if code := do(t, "POST", s.base+"/v1/events", eventJSON("1", fmt.Sprint("t", i), "p"), nil); code != http.StatusCreated {
			t.Fatalf("append %d with the bucket down: %d", i, code)
		}
	}
	var st statusOutput
	waitFor(t, s, "degraded after several failures", func() bool {
		st = statusOutput{}
		do(t, "GET", s.base+"/v1/status", "", &st)
		return len(st.Shards) == 1 && st.Shards[0].State == "degraded" && st.Shards[0].FailuresInStreak >= 3
	})
	if sh := st.Shards[0]; sh.Tip != 10 || sh.Unshipped != 10-sh.ShippedThrough || sh.LastBucketError == "" {
		t.Fatalf("status with the bucket down: %+v", sh)
	}
	if code := do(t, "GET", s.base+"/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("/readyz with the bucket down, appends taken: %d", code)
	}
	if n := strings.Count(s.stderr.String(), "the bucket is failing"); n != 1 {
		t.Fatalf("%d WARN lines for one outage, want 1; stderr:\n%s", n, s.stderr)
	}
	fb.down.Store(false)
	waitFor(t, s, "recovered", func() bool {
		st = statusOutput{}
		do(t, "GET", s.base+"/v1/status", "", &st)
		return st.Shards[0].State == "ready" && st.Shards[0].Unshipped == 0
	})
	if !strings.Contains(s.stderr.String(), `level=INFO msg="the bucket recovered"`) {
		t.Fatalf("no INFO line on recovery; stderr:\n%s", s.stderr)
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM with everything shipped exited %d; stderr:\n%s", code, s.stderr)
	}
}

// TestServeProcessUnshippedBound: with --max-unshipped-age and
// --refuse-when-unshipped, a bucket down past the bound makes /readyz 503
// and appends 503 (class storage, nothing written); when it is back the
// shard is ready and takes appends again.
func TestServeProcessUnshippedBound(t *testing.T) {
	fb := newFlakyBucket(t, "bound")
	s := startServer(t, "--dir", t.TempDir(), "--bucket", fb.url, "--tail-interval", "50ms",
		"--max-unshipped-age", "300ms", "--refuse-when-unshipped")
	fb.down.Store(true)
	if code := do(t, "POST", s.base+"/v1/events", eventJSON("1", "t0", "p"), nil); code != http.StatusCreated {
		t.Fatalf("append with the bucket just down: %d", code)
	}
	waitFor(t, s, "not ready past the bound", func() bool { return do(t, "GET", s.base+"/readyz", "", nil) == http.StatusServiceUnavailable })
	var out map[string]any
	if code := do(t, "POST", s.base+"/v1/events", eventJSON("1", "t1", "p"), &out); code != http.StatusServiceUnavailable || out["class"] != "storage" {
		t.Fatalf("append past the bound: %d %v", code, out)
	}
	fb.down.Store(false)
	waitFor(t, s, "ready again", func() bool { return do(t, "GET", s.base+"/readyz", "", nil) == http.StatusOK })
	var ap appendOutput
	if code := do(t, "POST", s.base+"/v1/events", eventJSON("1", "t2", "p"), &ap); code != http.StatusCreated || ap.GlobalSequence != 2 {
		t.Fatalf("append once the bucket is back: %d %+v (the refused one must not have taken a sequence)", code, ap)
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM exited %d; stderr:\n%s", code, s.stderr)
	}
}
