package shipper

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// RetryStartup runs fn until it succeeds, fails with an error transient
// does not accept (nil: transientStartup, which refuses verdicts about the
// data or the configuration), or timeout would pass before the next try.
// It is the start-up policy of both the reconcile check (New) and the
// hydration of an empty directory (the root's Open): backoff from 100 ms
// doubling to 5 s, one WARN per retry, stopped by ctx.
func RetryStartup(ctx context.Context, timeout time.Duration, log *slog.Logger, what string, fn func() error, transient func(error) bool) error {
	if transient == nil {
		transient = transientStartup
	}
	deadline := time.Now().Add(timeout)
	backoff := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if !transient(err) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		log.Warn(what+" failed at start; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
