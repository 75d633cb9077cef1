package bucketlog

import (
	"context"
	"iter"
	"time"

	"github.com/bucketlog/bucketlog/internal/live"
)

// Wait returns the owned shard's tip once a commit puts it above after (at
// once if it is); ctx's error if that ends first, ErrClosed once Close began.
func (l *Log) Wait(ctx context.Context, after uint64) (uint64, error) {
	if err := l.checkCtx(ctx); err != nil {
		return 0, err
	}
	return live.Wait(ctx, live.Closing(l.store, ErrClosed), after)
}

// Follow yields the records after after (from the base when it is below),
// then each one as it becomes durable, until the loop stops; ctx ending or
// Close yields a last (zero Record, error). It starts no goroutine.
func (l *Log) Follow(ctx context.Context, after uint64) iter.Seq2[Record, error] {
	return live.Follow(ctx, live.Closing(l.store, ErrClosed), after, func(a uint64, n int) (Page, error) { return l.Scan(ctx, a, n) })
}

// PullWait is Pull that, with nothing pending, waits up to d for a commit
// (then it answers the empty pull); errors are as Wait's.
func (l *Log) PullWait(ctx context.Context, consumer string, limit int, d time.Duration) (PullResult, error) {
	return live.Until(ctx, live.Closing(l.store, ErrClosed), d, func() (PullResult, bool, error) {
		res, err := l.Pull(ctx, consumer, limit)
		return res, len(res.Records) > 0, err
	})
}
