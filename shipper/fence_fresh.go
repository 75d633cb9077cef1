package shipper

// The fresh check of asynchronous appends (docs/FORMAT.md §6.9, writer
// fencing; FENCING.md's fence_fresh_ack): an asynchronous append is
// acknowledged after its fsync, so a writer that was paused (or idle) while
// another took the shard over would acknowledge until its next tick's HEAD
// found the claim. With the fresh check on, an append whose writer's last
// good fence check is older than one tick first waits for one HEAD of the
// next epoch's claim, shared by every append that arrives meanwhile, at
// most FreshAckWait (200 ms), before its frames are written: a HEAD that
// finds the claim fences the writer and the append is refused with nothing
// written. A HEAD that fails or is slow acknowledges as before (a failing
// bucket never fails an append), and an append already fsync'd is never
// answered "fenced" by this path. It runs only with a background tick
// (Options.FenceFreshAck is off for one-shot writers and in synchronous
// mode, whose acknowledgement already waits for a HEAD); an idle shard
// still makes no request.

import (
	"context"
	"sync"
	"time"
)

// DefaultFreshAckWait bounds how long an append waits for the fresh check.
const DefaultFreshAckWait = 200 * time.Millisecond

// freshState is the fresh check's state, guarded by its own mutex.
type freshState struct {
	mu       sync.Mutex
	lastGood time.Time     // when the last fence check that found no claim was sent
	inflight chan struct{} // closed when the shared HEAD in flight returns (nil: none)
}

// noteGoodCheck records a fence check, sent at sent, that found no newer
// claim.
func (s *Shipper) noteGoodCheck(sent time.Time) {
	s.fresh.mu.Lock()
	if sent.After(s.fresh.lastGood) {
		s.fresh.lastGood = sent
	}
	s.fresh.mu.Unlock()
}

// AppendGate is every append's check before it is written: Refusing, then
// the fresh check (FreshAck).
func (s *Shipper) AppendGate(ctx context.Context) error {
	if err := s.Refusing(); err != nil {
		return err
	}
	return s.FreshAck(ctx)
}

// FreshAck is the fresh check before an asynchronous append is written:
// nil when the append may go on, the fenced error when a HEAD found the
// claim of a newer epoch (nothing is written). A nil Shipper, or one
// without the fresh check, has nothing to do.
func (s *Shipper) FreshAck(ctx context.Context) error {
	if s == nil || !s.fencingOn() || !s.o.FenceFreshAck {
		return nil
	}
	f := &s.fresh
	f.mu.Lock()
	if !f.lastGood.IsZero() && s.o.Now().Sub(f.lastGood) <= s.o.TailInterval {
		f.mu.Unlock()
		return nil
	}
	ch := f.inflight
	if ch == nil {
		ch = make(chan struct{})
		f.inflight = ch
		go s.freshHead(ch)
	}
	f.mu.Unlock()
	wait := s.o.FreshAckWait
	if wait <= 0 {
		wait = DefaultFreshAckWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
		return s.Fenced()
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// freshHead sends the shared HEAD (checkFence: a claim found fences the
// writer) and releases its waiters. It is bounded by the longest an append
// would wait and more, so it never outlives a closing shipper for long.
func (s *Shipper) freshHead(ch chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = s.checkFence(ctx) // a failure acknowledges as before; fenced is read by Fenced
	cancel()
	s.fresh.mu.Lock()
	s.fresh.inflight = nil
	s.fresh.mu.Unlock()
	close(ch)
}
