package shipper_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/shipper"
)

// TestRetryStartupUsesTheWholeTimeout: a bucket that keeps failing is
// retried until the start-up timeout has passed (a last try at the
// deadline), not given up on as soon as the next backoff would overshoot
// it (which, with the doubling backoff, gave up after about half of it).
func TestRetryStartupUsesTheWholeTimeout(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	down := errors.New("the bucket does not answer")
	for _, timeout := range []time.Duration{50 * time.Millisecond, 1 * time.Second} {
		start := time.Now()
		var last time.Time
		tries := 0
		err := shipper.RetryStartup(context.Background(), timeout, log, "test", func() error {
			tries++
			last = time.Now()
			return down
		}, func(error) bool { return true })
		if !errors.Is(err, down) {
			t.Fatalf("timeout %v: %v", timeout, err)
		}
		if got := last.Sub(start); got < timeout {
			t.Fatalf("timeout %v: the last try came %v after the start (%d tries): gave up early", timeout, got, tries)
		}
	}
	// A refusal that is not transient ends it at once.
	tries := 0
	final := errors.New("a verdict about the data")
	if err := shipper.RetryStartup(context.Background(), time.Hour, log, "test", func() error { tries++; return final }, func(error) bool { return false }); !errors.Is(err, final) || tries != 1 {
		t.Fatalf("a non-transient error: %v after %d tries", err, tries)
	}
}
