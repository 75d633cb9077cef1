package shipper

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// fakeStartupClock is a start-up clock that moves only when RetryStartup
// waits: each wait is recorded and passes at once.
type fakeStartupClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *fakeStartupClock) clock() startupClock {
	return startupClock{
		now: func() time.Time { return c.now },
		after: func(d time.Duration) <-chan time.Time {
			c.waits = append(c.waits, d)
			c.now = c.now.Add(d)
			ch := make(chan time.Time, 1)
			ch <- c.now
			return ch
		},
	}
}

// TestRetryStartupWaitsDoubleAndTheLastIsCut: the waits between tries
// double from 100 ms up to 5 s, and the last one is cut short so that the
// last try comes exactly at the deadline (a wait of the whole backoff
// would try past it; a backoff that does not grow would hammer the bucket).
func TestRetryStartupWaitsDoubleAndTheLastIsCut(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	down := errors.New("the bucket does not answer")
	const ms = time.Millisecond
	for _, tc := range []struct {
		timeout time.Duration
		waits   []time.Duration
	}{
		{350 * ms, []time.Duration{100 * ms, 200 * ms, 50 * ms}},
		{300 * ms, []time.Duration{100 * ms, 200 * ms}},
		{20 * time.Second, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second, 3700 * ms}},
	} {
		c := &fakeStartupClock{now: time.Unix(1_000_000, 0)}
		start := c.now
		var tries []time.Duration
		err := retryStartup(context.Background(), c.clock(), tc.timeout, log, "test", func() error {
			tries = append(tries, c.now.Sub(start))
			return down
		}, func(error) bool { return true })
		if !errors.Is(err, down) {
			t.Fatalf("timeout %v: %v", tc.timeout, err)
		}
		if !slices.Equal(c.waits, tc.waits) {
			t.Fatalf("timeout %v: waited %v, want %v", tc.timeout, c.waits, tc.waits)
		}
		if last := tries[len(tries)-1]; last != tc.timeout {
			t.Fatalf("timeout %v: the last try came at %v, want at the deadline", tc.timeout, last)
		}
	}
}
