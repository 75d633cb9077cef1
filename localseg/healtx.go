package localseg

import (
	"errors"
	"fmt"
)

// ErrTxWindowIncomplete refuses an append (storage class: retry later)
// whose transaction id the transaction window does not hold while the
// window has a hole: its rebuild at open stopped at a damaged sealed
// segment, so the id could be one of that segment's and the append a retry
// that must answer its original. Nothing is written. The refusal ends when
// the segment is healed (the window is then rebuilt in full) or the store
// is reopened with it intact.
var ErrTxWindowIncomplete = errors.New("localseg: the transaction window has a hole at a damaged segment not healed yet; an append whose transaction id it does not hold could be a retry of an event there, retry once the segment is healed")

// txHoleLocked is the refusal of an append whose transaction id the window
// does not hold, while the window has a hole (nil otherwise). A full window
// holds the newest events after the hole, so the hole is outside it. The
// caller holds s.mu; nothing has been queued.
func (s *Store) txHoleLocked() error {
	if !s.hl.txHole.Load() || s.txns == nil || s.txns.n >= s.txns.max {
		return nil
	}
	s.hl.mu.Lock()
	id := s.hl.txPartial
	s.hl.mu.Unlock()
	if id == 0 {
		return nil
	}
	return fmt.Errorf("%w (segment %d)", ErrTxWindowIncomplete, id)
}

// closeTxHole runs a refresh of the window that found a group in flight
// (RefreshTxWindow) and reports whether the hole is closed now, so the
// refused append may run again. The caller does not hold s.mu.
func (s *Store) closeTxHole() bool {
	if !s.hl.txRefreshDue.CompareAndSwap(true, false) {
		return false
	}
	if err := s.RefreshTxWindow(); err != nil {
		s.log.Warn("localseg: the transaction window could not be rebuilt after healing", "dir", s.dir, "err", err)
	}
	return !s.hl.txHole.Load()
}
