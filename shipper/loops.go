package shipper

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

func (s *Shipper) start(ctx context.Context, wg *sync.WaitGroup) {
	s.background = true
	wg.Add(2)
	go func() { defer wg.Done(); s.tickLoop(ctx) }()
	go func() { defer wg.Done(); s.maintLoop(ctx) }()
}

// maintLoop uploads sealed segments (on every seal, and retrying failures
// with backoff), then runs tail cleanup and the periodic GC.
func (s *Shipper) maintLoop(ctx context.Context) {
	retry := time.NewTimer(0) // a first pass finds segments sealed before a restart
	defer retry.Stop()
	var gcTick <-chan time.Time
	if s.o.Policy.Enabled && s.o.GCInterval > 0 {
		t := time.NewTicker(s.o.GCInterval)
		defer t.Stop()
		gcTick = t.C
	}
	for {
		runGC := false
		select {
		case <-ctx.Done():
			return
		case <-s.sealed:
		case <-s.cleanupKick:
		case <-retry.C:
		case <-gcTick:
			runGC = true
		}
		err := s.maintain(ctx, runGC)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if err != nil {
			s.uploadBackoff = min(max(2*s.uploadBackoff, 100*time.Millisecond), s.o.UploadRetryMax)
			d := s.uploadBackoff
			s.mu.Unlock()
			retry.Reset(d/2 + rand.N(d/2+1))
			continue
		}
		s.uploadBackoff = 0
		dirty := s.cleanupDirty
		s.mu.Unlock()
		if dirty {
			retry.Reset(s.o.TailInterval)
		}
	}
}

// maintain is one maintenance pass: uploads, cleanup, and GC when asked.
func (s *Shipper) maintain(ctx context.Context, runGC bool) error {
	s.maint.Lock()
	defer s.maint.Unlock()
	if err := s.stopped(); err != nil {
		return nil // stopped for good: nothing to retry
	}
	_, err := s.uploadSealed(ctx)
	s.evictLocked() // after the uploads: what they made durable may go
	if err == nil && !s.o.DisableTailCleanup {
		err = s.cleanupLocked(ctx)
	}
	if runGC {
		if _, gerr := s.gcLocked(ctx, s.o.Policy, false, false); gerr != nil {
			s.log.Error("periodic GC failed", "err", gerr)
		}
	}
	return err
}

func (s *Shipper) stopped() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopErr
}

// secondWriter stops shipping, GC and cleanup for the shard for good.
func (s *Shipper) secondWriter(key string, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopErr == nil {
		s.stopErr = fmt.Errorf("%w: a different object exists under %s; shipping, GC and tail cleanup stopped for shard %d", ErrSecondWriter, key, s.shard)
		s.m.SecondWriterDetected.Inc()
		s.log.Error("second writer detected: shipping, GC and tail cleanup stopped", "key", key, "err", err)
	}
	return s.stopErr
}

// noteUpload and noteTail record the latest outcome of each shipping path;
// readiness needs both to succeed. Cleanup and GC failures leave objects
// behind, not events unshipped, and do not touch readiness.
func (s *Shipper) noteUpload(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uploadErr = err
	s.watch.note(s.o.Now(), err, s.failingLocked())
}

func (s *Shipper) noteTail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tailErr = err
	s.watch.note(s.o.Now(), err, s.failingLocked())
}

// health is nil while the shard ships.
func (s *Shipper) health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopErr != nil:
		return s.stopErr
	case s.uploadErr != nil:
		return fmt.Errorf("bucket failing, retrying segment uploads: %v", s.uploadErr)
	case s.tailErr != nil:
		return fmt.Errorf("bucket failing, retrying tail shipment: %v", s.tailErr)
	}
	return nil
}

func (s *Shipper) isDurable(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable[id]
}

// UploadReport counts one upload pass.
