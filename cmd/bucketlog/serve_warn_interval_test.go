package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
)

// TestBucketWarnIntervalEnv: NOETL_EHDB_BUCKET_WARN_INTERVAL_SECS sets the
// WARN summary interval (whole seconds, at least 1); anything else keeps
// the default with a warning.
func TestBucketWarnIntervalEnv(t *testing.T) {
	for _, tc := range []struct {
		v     string
		want  time.Duration
		warns bool
	}{
		{"", 0, false},
		{"5", 5 * time.Second, false},
		{"0", 0, true},
		{"1ms", 0, true},
	} {
		c, err := ConfigFromEnv(envOf(map[string]string{EnvBucketWarnInterval: tc.v}))
		if err != nil || c.BucketWarnInterval != tc.want || (len(c.Warnings) > 0) != tc.warns {
			t.Errorf("%q: %v %v %v", tc.v, c.BucketWarnInterval, c.Warnings, err)
		}
		var opts bucketlog.Options
		c.Apply(&opts)
		if opts.BucketWarnInterval != tc.want {
			t.Errorf("%q: Apply gives %v", tc.v, opts.BucketWarnInterval)
		}
	}
}

// TestServeBucketWarnIntervalFlag: --bucket-warn-interval below 1s (or
// without a bucket) is a usage error; set, a bucket that keeps failing is
// summarised by a "still failing" WARN line every interval, not every
// minute.
func TestServeBucketWarnIntervalFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--bucket", "mem://x", "--bucket-warn-interval", "999ms"},
		{"--bucket", "mem://x", "--bucket-warn-interval", "0"},
		{"--bucket-warn-interval", "5s"},
	} {
		r := runCLI(t, nil, append([]string{"serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0"}, args...)...)
		if r.code != 2 || r.obj["class"] != "usage" || !strings.Contains(r.stderr, "--bucket-warn-interval") {
			t.Errorf("%v:\n%s", args, r)
		}
	}

	fb := newFlakyBucket(t, "warninterval")
	s := startServer(t, "--dir", t.TempDir(), "--bucket", fb.url, "--tail-interval", "50ms", "--bucket-warn-interval", "1s")
	fb.down.Store(true)
	if code := do(t, "POST", s.base+"/v1/events", eventJSON("1", "t0", "p"), nil); code != http.StatusCreated {
		t.Fatalf("append with the bucket down: %d", code)
	}
	waitFor(t, s, "a second summary line", func() bool { return strings.Count(s.stderr.String(), "the bucket is still failing") >= 2 })
	if n := strings.Count(s.stderr.String(), "the bucket is failing"); n != 1 {
		t.Fatalf("%d first-failure lines, want 1; stderr:\n%s", n, s.stderr)
	}
	fb.down.Store(false)
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM with the bucket back exited %d; stderr:\n%s", code, s.stderr)
	}
}
