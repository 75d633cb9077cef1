package shipper_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/shipper"
	"github.com/bucketlog/bucketlog/takeover"
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

// TestRetryStartupRefusesAFencedVerdictAtOnce: a fenced verdict at start (a
// newer claim found by the start-up check) or a stale owner's disk is
// returned by the first attempt, not retried until the start-up timeout;
// a failed bucket request is retried.
func TestRetryStartupRefusesAFencedVerdictAtOnce(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, verdict := range []error{&fencing.FencedError{Shard: 0, Epoch: 1, Claimant: 2}, takeover.ErrStaleOwner} {
		calls := 0
		err := shipper.RetryStartup(context.Background(), time.Hour, log, "checking the bucket", func() error {
			calls++
			if calls > 3 {
				return nil // retried: a later attempt "passes"
			}
			return verdict
		}, nil)
		if calls != 1 || !errors.Is(err, verdict) {
			t.Errorf("%v: %d attempts, err %v; want 1 attempt and the verdict", verdict, calls, err)
		}
	}
	calls := 0
	err := shipper.RetryStartup(context.Background(), time.Hour, log, "checking the bucket", func() error {
		if calls++; calls == 1 {
			return &blobtier.ObjectError{Op: blobtier.OpList, Key: "noetl.ehdb.", Err: errors.New("503 Service Unavailable")}
		}
		return nil
	}, nil)
	if err != nil || calls != 2 {
		t.Fatalf("a failed bucket request: %d attempts, err %v; want a retry that passes", calls, err)
	}
}
