package shipper

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/bucketlog/bucketlog/coldload"
)

// RetryStartup runs fn until it succeeds, fails with an error transient
// does not accept (nil: coldload.Transient, the one start-up classifier:
// only a failed bucket request is retried; a verdict about the data, the
// configuration or the ownership, fenced included, is returned at once),
// or timeout has passed (the last wait is cut short so that the last try
// comes at the deadline: an operator's --startup-timeout is retried for in
// full).
// It is the start-up policy of both the reconcile check (New) and the
// hydration of an empty directory (the root's Open): backoff from 100 ms
// doubling to 5 s, one WARN per retry, stopped by ctx.
func RetryStartup(ctx context.Context, timeout time.Duration, log *slog.Logger, what string, fn func() error, transient func(error) bool) error {
	return retryStartup(ctx, startupClock{now: time.Now, after: time.After}, timeout, log, what, fn, transient)
}

// startupClock is the time RetryStartup reads and waits on (a test's own).
type startupClock struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

func retryStartup(ctx context.Context, clk startupClock, timeout time.Duration, log *slog.Logger, what string, fn func() error, transient func(error) bool) error {
	if transient == nil {
		transient = coldload.Transient
	}
	deadline := clk.now().Add(timeout)
	backoff := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		left := deadline.Sub(clk.now())
		if !transient(err) || left <= 0 {
			return err
		}
		wait := min(backoff, left) // the last try comes at the deadline
		log.Warn(what+" failed at start; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-clk.after(wait):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
