package buckets

import (
	"context"
	"fmt"
	"time"
)

// TickFunc is one shipping tick of the shard under test: an explicit
// Log.Ship, or a wait of one TailInterval while the engine's own ticker
// runs.
type TickFunc func(ctx context.Context) error

// SleepTick is a TickFunc that waits d: the engine's background ticker does
// the work.
func SleepTick(d time.Duration) TickFunc {
	return func(ctx context.Context) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
}

// ErrNeverQuiet is returned by Settle when the shard kept making requests.
var ErrNeverQuiet = fmt.Errorf("the shard never went quiet")

// Settle ticks until quiet consecutive ticks made no request through c,
// and at most limit ticks: what a shard does after its last append (the
// last tail put, the seal and upload, the cursor object, the cleanup) is
// over. It returns the ticks it took.
func Settle(ctx context.Context, c *Counter, tick TickFunc, quiet, limit int) (int, error) {
	run := 0
	for n := 1; n <= limit; n++ {
		before := c.Snapshot().Requests
		if err := tick(ctx); err != nil {
			return n, err
		}
		if c.Snapshot().Requests == before {
			run++
			if run >= quiet {
				return n, nil
			}
		} else {
			run = 0
		}
	}
	return limit, fmt.Errorf("%w: requests in the last of %d ticks (wanted %d quiet in a row)", ErrNeverQuiet, limit, quiet)
}

// Idle runs ticks ticks and returns what c counted during them.
func Idle(ctx context.Context, c *Counter, tick TickFunc, ticks int) (Counts, error) {
	before := c.Snapshot()
	for range ticks {
		if err := tick(ctx); err != nil {
			return c.Snapshot().Sub(before), err
		}
	}
	return c.Snapshot().Sub(before), nil
}

// PerHour converts requests seen over ticks ticks into requests per hour
// at one tick every interval.
func PerHour(requests int64, ticks int, interval time.Duration) float64 {
	if ticks <= 0 || interval <= 0 {
		return 0
	}
	return float64(requests) / float64(ticks) * (float64(time.Hour) / float64(interval))
}
