package shipper

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestBucketWatchRateLimit: a failure streak logs one WARN at its first
// failure, then one summary WARN per interval with the failures since the
// last line (never one per failure), and one INFO when it ends; the error
// kept for Status is redacted.
func TestBucketWatchRateLimit(t *testing.T) {
	var buf bytes.Buffer
	w := &bucketWatch{log: slog.New(slog.NewTextHandler(&buf, nil)), interval: time.Minute}
	now := time.Unix(1000, 0)
	boom := errors.New(`Put "http://u:SECRET@127.0.0.1:1/b/k": refused`)
	for i := range 100 { // 100 failures over 150 s: the first line, then two summaries
		w.note(now.Add(time.Duration(i)*1500*time.Millisecond), boom, true)
	}
	w.note(now.Add(151*time.Second), nil, false)
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != 3 {
		t.Fatalf("%d WARN lines for a 150 s streak with a 1 m interval, want 3:\n%s", n, out)
	}
	if !strings.Contains(out, "failures=40") || !strings.Contains(out, "level=INFO msg=\"the bucket recovered\" failures=100") {
		t.Fatalf("summary or recovery line wrong:\n%s", out)
	}
	if strings.Contains(out, "SECRET") {
		t.Fatalf("the secret reached the log:\n%s", out)
	}
	if since, _, _, _, streak := w.state(); !since.IsZero() || streak != 0 {
		t.Fatalf("after recovery: failing since %v, streak %d", since, streak)
	}
}
