package sim

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/bucketlog/bucketlog"
)

// Retry-safe appends (localseg/txwindow.go) in the simulation: before some
// appends, the run retries an earlier transaction id, with its event (the
// answer must be the original sequence, marked duplicate, and nothing is
// written) or with other content (it must be refused as invalid_state,
// naming that sequence). The retries draw from their own generator, so the
// rest of a seed's schedule is the one it had without them: a retry that
// is answered writes nothing.

// simTxnWindow is the window the simulated Log runs with (0: the default;
// TestSimDedupRED turns it off).
var simTxnWindow int

// retrier is the retry generator of a run.
type retrier struct {
	rng     *rand.Rand
	changed int // retries with other content made (their payloads are unique)
}

func (r *run) retrier() *retrier {
	if r.m.retry == nil {
		r.m.retry = &retrier{rng: rand.New(rand.NewPCG(r.seed, 0x7e7e7e))}
	}
	return r.m.retry
}

// maybeRetry retries an acknowledged event about one append in four, and
// one whose append failed (its outcome unknown) now and then.
func (r *run) maybeRetry(ctx context.Context) *violation {
	g := r.retrier()
	if g.rng.IntN(4) != 0 {
		return nil
	}
	if g.rng.IntN(5) == 0 {
		return r.retryFailed(ctx, g)
	}
	acked := slices.Sorted(maps.Keys(r.m.bySeqAck))
	if len(acked) == 0 {
		return nil
	}
	seq := acked[g.rng.IntN(len(acked))]
	ev, ok := r.m.hist[seq]
	if !ok {
		return nil
	}
	base, ok := r.base()
	if !ok || seq < base {
		return nil // reclaimed: its id is forgotten, a retry would be new
	}
	if g.rng.IntN(4) == 0 {
		return r.retryChanged(ctx, g, ev, seq)
	}
	res, err := r.w.log.Append(ctx, locEvent(ev))
	r.logf("retry %s (seq %d) -> seq %d dup=%v %s", short(ev.payload), seq, res.Seq, res.Duplicate, errClass(err))
	switch {
	case err != nil && !errors.Is(err, bucketlog.ErrNotInBucket):
		return nil // refused like any append (poisoned, not ready): nothing written
	case !res.Duplicate || res.Seq != seq:
		if now, ok := r.base(); !res.Duplicate && (!ok || seq < now) {
			// Reclaimed between the check and the append: written anew.
			delete(r.m.hist, seq)
			delete(r.m.bySeqAck, seq)
			return r.appended([]event{ev}, res.Seq, err)
		}
		return fail("dedup-retry", "retry of %s (transaction %s, acknowledged at sequence %d, base %d) answered sequence %d duplicate=%v", ev, ev.txn, seq, base, res.Seq, res.Duplicate)
	}
	return r.appended([]event{ev}, seq, err) // a synchronous confirmation counts
}

// retryChanged reuses the transaction id of ev (at seq) with another
// payload: refused, naming seq.
func (r *run) retryChanged(ctx context.Context, g *retrier, ev event, seq uint64) *violation {
	g.changed++
	other := event{exec: ev.exec, txn: ev.txn, payload: ev.payload + "~changed"}
	res, err := r.w.log.Append(ctx, locEvent(other))
	r.logf("retry-changed %s (seq %d) -> seq %d %s", short(ev.payload), seq, res.Seq, errClass(err))
	switch {
	case errors.Is(err, bucketlog.ErrInvalidState) && strings.Contains(err.Error(), "transaction id reused"):
		if !strings.Contains(err.Error(), "sequence "+itoa(seq)+" ") {
			return fail("dedup-conflict", "reuse of %s refused without naming sequence %d: %v", ev.txn, seq, err)
		}
		return nil
	case err == nil || errors.Is(err, bucketlog.ErrNotInBucket):
		if now, ok := r.base(); !ok || seq < now {
			// Reclaimed meanwhile: a new event, which the model now knows.
			r.m.sent[other.payload] = other
			delete(r.m.hist, seq)
			delete(r.m.bySeqAck, seq)
			return r.appended([]event{other}, res.Seq, err)
		}
		return fail("dedup-conflict", "transaction %s of sequence %d reused with another payload was written at %d", ev.txn, seq, res.Seq)
	}
	return nil
}

// retryFailed retries an append that was reported failed: if its event is
// in the log the answer is its sequence (a duplicate), else it is written
// now; either way the oracle learns where it is, and serve's checks (one
// sequence per payload, hence per transaction id) catch a second copy.
func (r *run) retryFailed(ctx context.Context, g *retrier) *violation {
	names := slices.Sorted(maps.Keys(r.m.failed))
	if len(names) == 0 {
		return nil
	}
	f := r.m.failed[names[g.rng.IntN(len(names))]]
	if r.ws != nil {
		if _, zombie := r.ws.ev[f.ev.payload]; zombie {
			r.ws.retried[f.ev.payload] = r.w.log.Store().Tip()
		}
	}
	res, err := r.w.log.Append(ctx, locEvent(f.ev))
	r.logf("retry-failed %s -> seq %d dup=%v %s", short(f.ev.payload), res.Seq, res.Duplicate, errClass(err))
	if err != nil && !errors.Is(err, bucketlog.ErrNotInBucket) {
		// A failed retry's outcome is unknown as its first append's was
		// (a poisoned store may still have written it, and a restart that
		// keeps the page cache recovers it). An earlier copy below the
		// base was reclaimed, so its id is out of the window and the
		// retry was a new event: demanding one sequence per payload then
		// was wrong (seeds 10695, 114945: the copy at 4 reclaimed, the
		// failed retry found at 82). The reclaimed copy leaves the
		// history, as when the retry succeeds (below).
		if now, ok := r.base(); ok {
			for s, e := range r.m.hist {
				if e.txn == f.ev.txn && s < now {
					delete(r.m.hist, s)
					delete(r.m.bySeqAck, s)
				}
			}
		}
		return nil
	}
	if had, ok := r.m.hist[res.Seq]; ok && had != f.ev {
		return fail("dedup-retry", "retry of failed %s answered sequence %d, which holds %s", f.ev, res.Seq, had)
	}
	for s, e := range r.m.hist {
		if e.txn == f.ev.txn && s != res.Seq {
			if now, ok := r.base(); !res.Duplicate && ok && s < now {
				// The earlier copy (recovered after the failure) was
				// reclaimed since: the window holds only the ids above
				// the reclaim base (localseg/txwindow.go), so the retry
				// is a new event, as for an acknowledged one above.
				delete(r.m.hist, s)
				delete(r.m.bySeqAck, s)
				continue
			}
			return fail("dedup-retry", "retry of failed %s answered sequence %d, but its transaction id is at %d", f.ev, res.Seq, s)
		}
	}
	delete(r.m.failed, f.ev.payload)
	return r.appended([]event{f.ev}, res.Seq, err)
}

// base is the first retained sequence of the open Log (false: unknown).
func (r *run) base() (uint64, bool) {
	snap, err := r.w.log.Store().Snapshot()
	return snap.ReclaimedSeq + 1, err == nil
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}
