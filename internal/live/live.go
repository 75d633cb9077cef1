package live

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// Source is what waiting needs of a store (localseg.Store has it).
type Source interface {
	Tip() uint64
	TipChanged() (<-chan struct{}, error)
}

// Wait returns the tip once it is above after. It returns the context's
// error (its cause when it has one) if that ends first, and
// localseg.ErrClosed once the store released its waiters.
func Wait(ctx context.Context, src Source, after uint64) (uint64, error) {
	for {
		ch, err := src.TipChanged()
		if err != nil {
			return 0, err
		}
		if tip := src.Tip(); tip > after {
			return tip, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// Until runs read, and when its answer is not ready (no record in it)
// runs it again after each commit until it is, or until d passes — then
// it answers with its last read, the empty page of a timeout (read after
// the last commit that woke it, so it is current). d ≤ 0 reads once.
// Errors are as Wait's.
func Until[T any](ctx context.Context, src Source, d time.Duration, read func() (T, bool, error)) (T, error) {
	var zero T
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	for {
		// The channel first: a commit after it is taken closes it, so the
		// read below either sees the commit or is woken by it.
		ch, err := src.TipChanged()
		if err != nil {
			return zero, err
		}
		v, ready, err := read()
		if err != nil || ready || d <= 0 {
			return v, err
		}
		select {
		case <-ch:
		case <-timeout:
			return v, nil
		case <-ctx.Done():
			return zero, context.Cause(ctx)
		}
	}
}

// FollowPage is how many records Follow reads at a time.
const FollowPage = 256

// Follow yields the records after after in order — first the retained
// history (a start below the reclaim base begins at the base, as a scan
// clamps it), then each record as its commit publishes it — until the
// consumer stops, scan fails, ctx ends or the store releases its waiters;
// then it yields one last (zero Record, error) and returns. It starts no
// goroutine: it runs in the caller's.
func Follow(ctx context.Context, src Source, after uint64, scan func(after uint64, limit int) (localseg.Page, error)) iter.Seq2[localseg.Record, error] {
	return func(yield func(localseg.Record, error) bool) {
		for {
			ch, err := src.TipChanged()
			if err == nil {
				err = context.Cause(ctx)
				if ctx.Err() == nil {
					err = nil
				}
			}
			var p localseg.Page
			if err == nil {
				p, err = scan(after, FollowPage)
			}
			if err != nil {
				yield(localseg.Record{}, err)
				return
			}
			for _, r := range p.Records {
				if !yield(r, nil) {
					return
				}
				after = r.Seq
			}
			if len(p.Records) > 0 {
				continue
			}
			select {
			case <-ch:
			case <-ctx.Done():
				yield(localseg.Record{}, context.Cause(ctx))
				return
			}
		}
	}
}

// Closing is src whose release answers closed (wrapping the store's
// error) instead of localseg.ErrClosed, so a caller's waits end with its
// own closed error.
func Closing(src Source, closed error) Source { return closing{src, closed} }

type closing struct {
	Source
	closed error
}

func (c closing) TipChanged() (<-chan struct{}, error) {
	ch, err := c.Source.TipChanged()
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", c.closed, err)
	}
	return ch, nil
}
