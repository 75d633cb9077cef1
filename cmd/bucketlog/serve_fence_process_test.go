package main

import (
	"fmt"
	"net/http"
	"os"
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
// acknowledges 4..6 in sync mode; A resumes (SIGCONT). A's first append
// after the resume waits for the fresh check's HEAD (its last check is
// older than one tick), which finds the claim: A answers 409 (class
// fenced), /readyz 503 and /healthz 200, and logs the events it
// acknowledged locally after the cut, if any (the fresh check's HEAD may
// fail on a connection the pause broke; then A's tick finds the claim). A restore from the bucket holds exactly A's
// events up to the cut and B's after it.
func TestServeProcessFencedByATakeover(t *testing.T) {
	url, _, a, b, accepted := fencedServePair(t, true)
	var st statusOutput
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
		// (An append in flight when the fence was found may be written
		// after that line: a later WARN names the new last.)
		want := []string{"unpublished_first_seq=4 ", "unpublished_first_execution_id=z4 ",
			fmt.Sprintf("unpublished_last_seq=%d unpublished_last_execution_id=z%d", 3+accepted, 3+accepted)}
		waitFor(t, a, fmt.Sprintf("A's fenced lines naming its unpublished records %q", want), func() bool {
			logs := a.stderr.String()
			for _, w := range want {
				if !strings.Contains(logs, w) {
					return false
				}
			}
			return true
		})
	}
	// B is unaffected and still acknowledges.
	if code := do(t, "POST", b.base+"/v1/events", eventJSON("1", "b7", "b7"), nil); code != http.StatusCreated {
		t.Fatalf("B's append after A resumed: %d", code)
	}
	if code := do(t, "GET", b.base+"/readyz", "", nil); code != http.StatusOK {
		t.Fatalf("B's /readyz: %d", code)
	}
	if got, want := bucketHistory(t, url), "1=a1 2=a2 3=a3 4=b4 5=b5 6=b6 7=b7"; got != want {
		t.Fatalf("the bucket's history: %s, want %s", got, want)
	}
	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("B's SIGTERM exited %d; stderr:\n%s", code, b.stderr)
	}
}

// bucketHistory restores the bucket into a scratch directory and returns
// its events as "seq=payload ...".
func bucketHistory(t *testing.T, url string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	ok(t, nil, "restore", "--bucket", url, "--dir", dir)
	var got []string
	for _, rec := range ok(t, nil, "scan", "--dir", dir).records(t) {
		got = append(got, fmt.Sprint(rec["global_sequence"], "=", rec["payload"]))
	}
	return strings.Join(got, " ")
}

// fencedServePair runs the takeover of TestServeProcessFencedByATakeover up
// to A's first 409: A (async, on dirA) shipped a1..a3, was paused while B
// (sync) took over and acknowledged b4..b6, and after its resume
// acknowledged accepted events (execution and transaction ids z4.., payloads
// zombie4..) locally before it was fenced.
func fencedServePair(t *testing.T, freshAck bool) (url, dirA string, a, b *server, accepted int) {
	t.Helper()
	_, url = s3Emulator(t)
	const tick = 200 * time.Millisecond
	dirA = t.TempDir()
	a = startServer(t, "--dir", dirA, "--bucket", url, "--tail-interval", tick.String(), fmt.Sprint("--fence-fresh-ack=", freshAck))
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

	b = startServer(t, "--dir", t.TempDir(), "--bucket", url, "--tail-interval", tick.String(), "--sync-to-bucket")
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

	// The pause lasts at least one tick, so A's last fence check is older
	// than one tick when it resumes (the fresh check's condition).
	time.Sleep(tick)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	resumedAt := time.Now()
	// A has not learnt yet: it may still acknowledge locally (asynchronous
	// mode) until its tick ships and HEADs the claim above its epoch.
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
	waitFor(t, a, "A's fenced log line", func() bool { return strings.Contains(a.stderr.String(), "level=ERROR msg=\"fenced: ") })
	return url, dirA, a, b, accepted
}

// TestQuarantineReappendThroughTheOwner: the events the fenced A
// acknowledged locally after the cut are re-appended through B, the
// current owner, from A's moved-aside directory: a dry run lists them and
// appends nothing; the run appends each once with its transaction id; a
// second run finds them all duplicates. The events up to the cut are never
// re-appended.
func TestQuarantineReappendThroughTheOwner(t *testing.T) {
	// Without the fresh check A acknowledges locally until its tick.
	url, dirA, a, b, accepted := fencedServePair(t, false)
	if accepted == 0 {
		t.Skip("A was fenced before it acknowledged anything locally: nothing to re-append")
	}
	if code := a.stop(syscall.SIGTERM); code != 8 {
		t.Fatalf("the fenced A's SIGTERM exited %d, want 8; stderr:\n%s", code, a.stderr)
	}
	// What A's next start does first: move the stale owner's disk aside.
	shard := filepath.Join(dirA, "shard-0000")
	if err := os.Rename(shard, shard+".fenced-1"); err != nil {
		t.Fatal(err)
	}
	args := []string{"quarantine", "reappend", "--dir", dirA, "--shard", "0", "--epoch", "1", "--bucket", url}
	r := ok(t, nil, append(args, "--dry-run")...)
	if r.num(t, "cut") != 3 || r.num(t, "candidates") != int64(accepted) || r.num(t, "appended") != 0 || !strings.Contains(r.stdout, `"transaction_id":"z4"`) {
		t.Fatalf("dry run:\n%s", r)
	}
	want := "1=a1 2=a2 3=a3 4=b4 5=b5 6=b6"
	if got := bucketHistory(t, url); got != want {
		t.Fatalf("a dry run changed the log: %s", got)
	}
	r = ok(t, nil, append(args, "--to", b.base)...)
	if r.num(t, "appended") != int64(accepted) || r.num(t, "duplicates") != 0 {
		t.Fatalf("reappend:\n%s", r)
	}
	for i := 4; i < 4+accepted; i++ {
		want += fmt.Sprintf(" %d=zombie%d", i+3, i)
	}
	if got := bucketHistory(t, url); got != want {
		t.Fatalf("after the reappend the log holds %s, want %s", got, want)
	}
	r = ok(t, nil, append(args, "--to", b.base)...)
	if r.num(t, "appended") != 0 || r.num(t, "duplicates") != int64(accepted) {
		t.Fatalf("a second reappend:\n%s", r)
	}
	if got := bucketHistory(t, url); got != want {
		t.Fatalf("after a second reappend the log holds %s, want %s", got, want)
	}
	runCLI(t, nil, append(args, "--epoch", "2", "--to", b.base)...).want(t, 3, "invalid_state")
}
