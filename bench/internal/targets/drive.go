package targets

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DriveResult is one timed repetition.
type DriveResult struct {
	Ops     uint64
	Elapsed time.Duration
	// Full is set when a preallocated limit file ran out before the
	// duration; Elapsed is then the time until it did.
	Full bool
	// Fsyncs and FsyncTime are the target's own count and total duration
	// of the fsyncs inside the timed part, for targets that report them
	// (FsyncCounter); zero otherwise.
	Fsyncs    uint64
	FsyncTime time.Duration
	// Seals is how many segments the target sealed inside the timed part
	// (targets that report it: SealCounter).
	Seals uint64
}

// SealCounter is implemented by targets that report segment rollovers.
type SealCounter interface{ Seals() uint64 }

// AppendsPerFsync is how many appends shared one fsync (0 when unknown).
func (r DriveResult) AppendsPerFsync() float64 {
	if r.Fsyncs == 0 {
		return 0
	}
	return float64(r.Ops) / float64(r.Fsyncs)
}

// PerSecond is the acknowledged appends per second.
func (r DriveResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Warmup is how many appends a fresh log takes before timing starts, so
// the first file creation is not part of the rate.
const Warmup = 16

// Drive runs writers goroutines that append p to a in a loop for d and
// counts the appends acknowledged. Timing ends when the last writer has
// returned from its last append, so every counted append completed inside
// Elapsed. It then checks the log holds exactly warm-up + counted records.
func Drive(ctx context.Context, a Appender, writers int, d time.Duration, p *Payload) (DriveResult, error) {
	if writers < 1 {
		return DriveResult{}, fmt.Errorf("writers must be at least 1, got %d", writers)
	}
	for range Warmup {
		if err := a.Append(p); err != nil {
			return DriveResult{}, fmt.Errorf("warm-up append: %w", err)
		}
	}
	fc, _ := a.(FsyncCounter)
	var fsyncs0 uint64
	var fsyncT0 time.Duration
	if fc != nil {
		fsyncs0, fsyncT0 = fc.Fsyncs()
	}
	sc, _ := a.(SealCounter)
	var seals0 uint64
	if sc != nil {
		seals0 = sc.Seals()
	}
	var (
		stop    atomic.Bool
		ops     atomic.Uint64
		full    atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for range writers {
		wg.Go(func() {
			var n uint64
			for !stop.Load() && ctx.Err() == nil {
				if err := a.Append(p); err != nil {
					if errors.Is(err, ErrFull) {
						full.Store(true)
						stop.Store(true)
						break
					}
					errOnce.Do(func() { first = err })
					stop.Store(true)
					break
				}
				n++
			}
			ops.Add(n)
		})
	}
	wg.Wait()
	res := DriveResult{Ops: ops.Load(), Elapsed: time.Since(start), Full: full.Load()}
	if fc != nil {
		n, t := fc.Fsyncs()
		res.Fsyncs, res.FsyncTime = n-fsyncs0, t-fsyncT0
	}
	if sc != nil {
		res.Seals = sc.Seals() - seals0
	}
	if first != nil {
		return res, first
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	got, err := a.Count()
	if err != nil {
		return res, fmt.Errorf("count after run: %w", err)
	}
	if want := res.Ops + Warmup; got != want {
		return res, fmt.Errorf("log holds %d records after %d acknowledged appends", got, want)
	}
	return res, nil
}
