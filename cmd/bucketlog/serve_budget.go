package main

import (
	"errors"
	"io"
)

// bodyStep is how much of the in-flight budget a body sent without
// Content-Length reserves at a time, ahead of the bytes it reads.
const bodyStep = 64 << 10

// errBudget is a budgetReader's refusal: the budget has no room for the
// body's next bytes.
var errBudget = errors.New("the in-flight body budget is spent")

// reserve takes n bytes of the in-flight budget, or nothing and false when
// that would pass it.
func (a *api) reserve(n int64) bool {
	if a.inflight.Add(n) > a.maxInflight {
		a.inflight.Add(-n)
		return false
	}
	return true
}

// budgetReader reads a body of unknown length, reserving the in-flight
// budget in steps of bodyStep (at most limit, the body cap, in all) before
// the bytes it reads: the bytes held never pass what is reserved (but for
// the one byte past the cap that tells a body over it), and a body the
// budget has no room for fails with errBudget. reserved is what to give
// back once the body is no longer held.
type budgetReader struct {
	a        *api
	r        io.ReadCloser
	limit    int64
	reserved int64
	read     int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.read == b.limit {
		// One byte past the cap, unreserved: it only tells a body over
		// the cap (refused, 413) from one that ends there.
		p = p[:1]
	} else {
		if b.read == b.reserved {
			step := min(bodyStep, b.limit-b.reserved)
			if !b.a.reserve(step) {
				return 0, errBudget
			}
			b.reserved += step
		}
		if room := b.reserved - b.read; int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *budgetReader) Close() error { return b.r.Close() }
