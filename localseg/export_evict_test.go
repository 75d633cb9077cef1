package localseg

// SetUnsafeEvictAny turns on the RED control's unsafe eviction (no durable
// check) and returns its undo.
func SetUnsafeEvictAny(on bool) func() {
	unsafeEvictAny.Store(on)
	return func() { unsafeEvictAny.Store(false) }
}

// ReadAheadInFlightForTest reports whether segment id's read-ahead was
// handed to a read as its fetch in flight.
func ReadAheadInFlightForTest(s *Store, id uint64) bool {
	s.ev.mu.Lock()
	defer s.ev.mu.Unlock()
	c := s.ev.flight[id]
	return c != nil && c.ahead
}
