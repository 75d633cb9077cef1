package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// TestServeRetrySafeAppends: a retry answers 200 with the original
// sequence and "duplicate":true; the id with other content is 409 naming
// the sequence; a batch says which events were duplicates.
func TestServeRetrySafeAppends(t *testing.T) {
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)

	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t1", "a")); code != http.StatusCreated || out["duplicate"] != nil {
		t.Fatalf("first append: %d %v", code, out)
	}
	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t1", "a")); code != http.StatusOK || out["duplicate"] != true || out["global_sequence"] != 1.0 || out["log_record_count"] != 1.0 {
		t.Fatalf("retry: %d %v", code, out)
	}
	code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t1", "other"))
	if code != http.StatusConflict || out["class"] != "invalid_state" || !strings.Contains(out["error"].(string), "sequence 1") {
		t.Fatalf("reuse with other content: %d %v", code, out)
	}
	batch := `{"events":[` + eventJSON("1", "t2", "b") + "," + eventJSON("1", "t1", "a") + "," + eventJSON("1", "t3", "c") + `]}`
	code, out = call(t, a, "POST", "/v1/events", batch)
	if dups, _ := out["duplicates"].([]any); code != http.StatusCreated || out["appended"] != 2.0 || out["first_sequence"] != 2.0 || out["last_sequence"] != 3.0 ||
		len(dups) != 1 || dups[0].(map[string]any)["index"] != 1.0 || dups[0].(map[string]any)["global_sequence"] != 1.0 {
		t.Fatalf("batch with a retried event: %d %v", code, out)
	}
	code, out = call(t, a, "POST", "/v1/events", batch)
	if dups, _ := out["duplicates"].([]any); code != http.StatusOK || out["appended"] != 0.0 || len(dups) != 3 {
		t.Fatalf("the batch retried: %d %v", code, out)
	}
	code, out = call(t, a, "POST", "/v1/events", `{"events":[`+eventJSON("1", "t4", "d")+","+eventJSON("1", "t2", "changed")+`]}`)
	if code != http.StatusConflict || !strings.Contains(out["error"].(string), "sequence 2") {
		t.Fatalf("batch reusing an id: %d %v", code, out)
	}
	if code, out := call(t, a, "GET", "/v1/events", ""); code != 200 || out["record_count"] != 3.0 {
		t.Fatalf("the log should hold each event once: %d %v", code, out)
	}
}

// TestServeRetryAfter202: in synchronous mode an append the bucket did not
// confirm (202) is retried with its transaction id: 202 again with the same
// sequence while the bucket refuses, 200 "duplicate":true once it holds it;
// the event is stored once.
func TestServeRetryAfter202(t *testing.T) {
	ctx := context.Background()
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Bucket: b, SyncToBucket: true,
		SyncWait: 300 * time.Millisecond, TailInterval: 50 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)

	rule := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal})
	ev := eventJSON("1", "unknown-outcome", "x")
	if code, out := call(t, a, "POST", "/v1/events", ev); code != http.StatusAccepted || out["global_sequence"] != 1.0 {
		t.Fatalf("unconfirmed append: %d %v", code, out)
	}
	if code, out := call(t, a, "POST", "/v1/events", ev); code != http.StatusAccepted || out["global_sequence"] != 1.0 || out["duplicate"] != true {
		t.Fatalf("retry while the bucket refuses: %d %v", code, out)
	}
	fb.Remove(rule)
	deadline := time.Now().Add(hangGuard)
	for {
		code, out := call(t, a, "POST", "/v1/events", ev)
		if code == http.StatusOK && out["duplicate"] == true && out["global_sequence"] == 1.0 {
			break
		}
		if code != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("retry once the bucket is back: %d %v", code, out)
		}
	}
	if code, out := call(t, a, "GET", "/v1/events", ""); code != 200 || out["record_count"] != 1.0 {
		t.Fatalf("the retried event should be stored once: %d %v", code, out)
	}
}

// TestCLIAppendRetry: the same append run twice exits 0 both times, the
// second with "duplicate":true and the first's sequence; the id with
// another payload exits 3; --transaction-window -1 turns it off (the RED
// control: the retry is stored twice).
func TestCLIAppendRetry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	args := []string{"append", "--dir", dir, "--execution-id", "100", "--transaction-id", "t1", "--payload", "one"}
	first := ok(t, nil, args...)
	again := ok(t, nil, args...)
	if again.obj["duplicate"] != true || again.num(t, "global_sequence") != first.num(t, "global_sequence") || first.obj["duplicate"] != nil {
		t.Fatalf("retry:\n%s\nthen\n%s", first, again)
	}
	r := runCLI(t, nil, "append", "--dir", dir, "--execution-id", "100", "--transaction-id", "t1", "--payload", "two").want(t, 3, "invalid_state")
	if !strings.Contains(r.obj["error"].(string), "sequence 1") {
		t.Fatalf("conflict does not name the sequence:\n%s", r)
	}
	off := ok(t, nil, append(args, "--transaction-window", "-1")...)
	if off.obj["duplicate"] != nil || off.num(t, "global_sequence") != 2 {
		t.Fatalf("with the window off the retry is written again:\n%s", off)
	}
	if recs := ok(t, nil, "scan", "--dir", dir).records(t); len(recs) != 2 {
		t.Fatalf("scan: %d records, want 2 (one retry deduplicated, one written with the window off)", len(recs))
	}
}
