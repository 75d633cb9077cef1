package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeProcessFencedByATakeover: two real serve processes on one
// in-process gofakes3 bucket (writer fencing, docs/FORMAT.md §6.8). A owns
// the shard and ships 1..3; A is stopped (SIGSTOP: a paused pod); B starts
// on a fresh directory (a takeover: claim 2, hydrate, cut at 3) and
// acknowledges 4..6 in sync mode; A resumes (SIGCONT). A's first tick
// after the resume finds the claim: A answers appends 409 (class fenced),
// /readyz 503 and /healthz 200, and logs the events it acknowledged
// locally after the cut. A restore from the bucket holds exactly A's
// events up to the cut and B's after it.
func TestServeProcessFencedByATakeover(t *testing.T) {
	_, url := s3Emulator(t)
	const tick = 200 * time.Millisecond
	a := startServer(t, "--dir", t.TempDir(), "--bucket", url, "--tail-interval", tick.String())
	for i := 1; i <= 3; i++ {
		if code := do(t, "POST", a.base+"/v1/events", eventJSON("1", fmt.Sprint("a", i), fmt.Sprint("a", i)), nil); code != http.StatusCreated {
			t.Fatalf("A's append %d: %d", i, code)
		}
	}
	waitFor(t, a, "A shipped 1..3", func() bool {
		var st statusOutput
		do(t, "GET", a.base+"/v1/status", "", &st)
		return len(st.Shards) == 1 && st.Shards[0].ShippedThrough == 3 && st.Shards[0].Epoch == 1
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	})

	b := startServer(t, "--dir", t.TempDir(), "--bucket", url, "--tail-interval", tick.String(), "--sync-to-bucket")
	var st statusOutput
	do(t, "GET", b.base+"/v1/status", "", &st)
	if sh := st.Shards[0]; sh.Epoch != 2 || sh.Tip != 3 || sh.Fenced {
		t.Fatalf("B after its takeover: %+v, want epoch 2 over A's 3 events", sh)
	}
	for i := 4; i <= 6; i++ {
		var ap appendOutput
		if code := do(t, "POST", b.base+"/v1/events", eventJSON("1", fmt.Sprint("b", i), fmt.Sprint("b", i)), &ap); code != http.StatusCreated || ap.GlobalSequence != uint64(i) {
			t.Fatalf("B's sync append %d: %d %+v", i, code, ap)
		}
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	resumedAt := time.Now()
	// A has not learnt yet: it may still acknowledge locally (asynchronous
	// mode) until its tick ships and HEADs the claim above its epoch.
	accepted := 0
	var fencedAt time.Duration
	deadline := time.Now().Add(hangGuard)
	for i := 4; ; i++ {
		var out map[string]any
		code := do(t, "POST", a.base+"/v1/events", eventJSON(fmt.Sprint("z", i), fmt.Sprint("z", i), fmt.Sprint("zombie", i)), &out)
		if code == http.StatusConflict {
			if out["class"] != "fenced" {
				t.Fatalf("A's refusal: %v, want class fenced", out)
			}
			fencedAt = time.Since(resumedAt)
			break
		}
		if code != http.StatusCreated {
			t.Fatalf("A's append after the resume: %d %v", code, out)
		}
		accepted++
		if time.Now().After(deadline) {
			t.Fatalf("A never answered 409; stderr:\n%s", a.stderr)
		}
		time.Sleep(tick / 10)
	}
	t.Logf("A answered 409 %v after SIGCONT (tick %v), having acknowledged %d appends locally first", fencedAt, tick, accepted)
	if accepted == 0 && !strings.Contains(a.stderr.String(), "fenced") {
		t.Fatalf("A refused without a fenced log line; stderr:\n%s", a.stderr)
	}
	do(t, "GET", a.base+"/v1/status", "", &st)
	if sh := st.Shards[0]; !sh.Fenced || sh.Ready || sh.Epoch != 1 {
		t.Fatalf("A's status once fenced: %+v", sh)
	}
	if code := do(t, "GET", a.base+"/readyz", "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("A's /readyz once fenced: %d", code)
	}
	if code := do(t, "GET", a.base+"/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("A's /healthz once fenced: %d (liveness must not restart it)", code)
	}
	if accepted > 0 {
		// The records A acknowledged locally after the cut: the sequence
		// range and the first and last execution ids (the operator's lead
		// for quarantine reappend).
		want := fmt.Sprintf("unpublished_first_seq=4 unpublished_last_seq=%d unpublished_first_execution_id=z4 unpublished_last_execution_id=z%d", 3+accepted, 3+accepted)
		if !strings.Contains(a.stderr.String(), want) {
			t.Fatalf("A's fenced line does not name its unpublished records (%s); stderr:\n%s", want, a.stderr)
		}
	}
	// B is unaffected and still acknowledges.
	if code := do(t, "POST", b.base+"/v1/events", eventJSON("1", "b7", "b7"), nil); code != http.StatusCreated {
		t.Fatalf("B's append after A resumed: %d", code)
	}
	if code := do(t, "GET", b.base+"/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("B's /readyz: %d", code)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	r := ok(t, nil, "restore", "--bucket", url, "--dir", dir)
	if r.num(t, "last_sequence") != 7 {
		t.Fatalf("restore:\n%s", r)
	}
	recs := ok(t, nil, "scan", "--dir", dir).records(t)
	var got []string
	for _, rec := range recs {
		got = append(got, fmt.Sprint(rec["global_sequence"], "=", rec["payload"]))
	}
	if want := "1=a1 2=a2 3=a3 4=b4 5=b5 6=b6 7=b7"; strings.Join(got, " ") != want {
		t.Fatalf("the bucket's history: %v, want %s", got, want)
	}
	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("B's SIGTERM exited %d; stderr:\n%s", code, b.stderr)
	}
}
