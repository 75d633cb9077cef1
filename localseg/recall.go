package localseg

// RecallDeleted puts consumer name back into the record of recent deletes
// (Snapshot.Deleted) with bound at: the last event before its
// ConsumerDelete frame is at or before event at. The record is kept in
// memory, so an owner that starts again calls this for the deletes it
// finds in its own frames that the bucket's cursor object does not carry
// yet: the object's tombstones come from the record (docs/FORMAT.md §6.6),
// and without it a ConsumerCreate that reached the bucket while its
// ConsumerDelete did not brings the consumer back in a restore. A live
// consumer (created again since) or an invalid name is ignored.
func (s *Store) RecallDeleted(name string, at uint64) {
	if _, err := validateName("consumer", name); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headCons[name] != nil {
		return
	}
	at = min(at, max(s.nextSeq, 1)-1)
	if old, ok := s.deleted[name]; ok && old >= at {
		return
	}
	s.noteDeletedAtLocked(name, at)
}
