package blobtier

import (
	"context"
	"time"
)

// The engine's waits between retries and polls (this package's retry of a
// create, the watermark's back-off, the fence verdict's poll) go through
// Wait, so a caller can take them off the wall clock: a deterministic
// simulation steps its own clock and must not sleep (WithWait).

type waitKey struct{}

// WithWait returns a context under which every Wait calls fn instead of
// waiting on the wall clock (tests). fn should return ctx's error once ctx
// has ended, as Wait does.
func WithWait(ctx context.Context, fn func(ctx context.Context, d time.Duration) error) context.Context {
	return context.WithValue(ctx, waitKey{}, fn)
}

// Wait waits d, or until ctx ends (then its error), or calls the function
// WithWait put in ctx.
func Wait(ctx context.Context, d time.Duration) error {
	if fn, ok := ctx.Value(waitKey{}).(func(context.Context, time.Duration) error); ok {
		return fn(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
