package localseg

// Poisoned returns the error that poisoned the store, or nil. A store can be
// poisoned with no write failing: a failure after the fsync that covered an
// append group (the checkpoint cache write) lets the group succeed and
// poisons the store for the next one, so readiness asks here rather than
// waiting for an append to fail.
func (s *Store) Poisoned() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poison
}
