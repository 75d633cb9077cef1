package shipper

import (
	"context"
	"fmt"
	"time"
)

// RefusesPull is why a pull is refused after a second writer (nil before
// one): a pull of an existing consumer writes nothing and is still served;
// one that would create the consumer is refused. Nil on a nil Shipper.
func (s *Shipper) RefusesPull(consumer string) error {
	if s == nil {
		return nil
	}
	err := s.stopped()
	if err == nil {
		return nil
	}
	snap, serr := s.store.Snapshot()
	if serr != nil {
		return serr
	}
	if _, ok := snap.Consumers[consumer]; ok {
		return nil
	}
	return err
}

// Close ships one last time (Final, bounded by timeout), then releases
// every synchronous append still waiting (StopWaiters).
func (s *Shipper) Close(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.final(ctx)
	s.stopWaiters()
	if err != nil {
		return fmt.Errorf("last shipment: %w", err)
	}
	return nil
}
