package shipper

import (
	"context"
	"math/rand/v2"
	"time"
)

// syncPasses is how many tail passes synchronous appends may have in
// flight at once. With one, a group that forms while the previous group's
// put is in flight waits for that put, then for its own: an appender waits
// about two cycles and 64 appenders reach only 32 times one. More passes
// start the next group's put at once (three: 64 appenders wait about one
// cycle at a 20 ms round trip, BENCHMARKS.md). Each pass prepares from the
// shipped position, so its object also holds the lower groups still in
// flight: a commit is always contiguous, and no group is acknowledged above
// a failed lower put (the higher object holds the lower groups' events
// too). The price is bytes: under a steady synchronous load a tail object
// repeats the groups still in flight below it.
const syncPasses = 3

// pipelineMin is the smallest group that starts a pass while another is in
// flight (below it the group waits for a pass to end, as with one pass).
const pipelineMin = 8

// tickLoop seals by age and ships the tail on every tick, and at once when
// a synchronous append is waiting (up to syncPasses such passes at once;
// the periodic pass runs in the loop itself).
func (s *Shipper) tickLoop(ctx context.Context) {
	t := time.NewTicker(s.o.TailInterval)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := 20 * time.Millisecond
	inFlight := 0
	pending := false       // a kick came while every synchronous pass was busy
	var launchedTip uint64 // the local tip when the newest synchronous pass started
	done := make(chan error, syncPasses)
	finished := func(err error) {
		s.updateGauges()
		if err != nil && s.waiters.Load() > 0 && ctx.Err() == nil {
			// Synchronous appends are waiting: retry soon, with backoff.
			retry.Reset(backoff + rand.N(backoff))
			backoff = min(2*backoff, time.Second)
		} else if err == nil {
			backoff = 20 * time.Millisecond
		}
	}
	defer func() {
		for ; inFlight > 0; inFlight-- {
			<-done
		}
	}()
	for {
		forSync := false
		select {
		case <-ctx.Done():
			return
		case err := <-done:
			inFlight--
			finished(err)
			if !pending {
				continue
			}
			forSync = true
		case <-t.C:
		case <-s.kick:
			forSync = true
		case <-retry.C:
			forSync = true
		}
		// Another pass only for events the ones in flight cannot hold
		// (appended after the newest started), and only for a group of
		// pipelineMin or more: each pass is a put (sync mode pays per
		// group), and a trickle of appends loses little by waiting one put.
		if forSync && (inFlight == syncPasses || inFlight > 0 && s.store.Tip() < launchedTip+pipelineMin) {
			pending = true
			continue
		}
		pending = false
		if _, err := s.store.SealIfDue(); err != nil {
			s.noteErr(err)
			s.log.Error("seal by age failed", "err", err)
		}
		if forSync {
			inFlight++
			launchedTip = s.store.Tip()
			go func() { done <- s.shipTailPass(ctx, passSync) }()
			continue
		}
		finished(s.shipTailPass(ctx, passTick))
	}
}
