package localseg

// A lazy hydrate (ImportEvicted) records the older segments as evicted
// unread and imports the consumer state it computed from the newest
// segments, the tail objects and the cursor object (whose frames it writes
// into the local segments) into the checkpoint (ImportCheckpoint). It is
// authoritative for every consumer frame of the imported segments, as the
// cursor object is for a full restore (docs/FORMAT.md §9.1 step 7, §9.4):
// their frames are older than it, and a consumer created there and deleted
// later by a frame that never reached the bucket would otherwise come back
// (sim seed 400528). So every replay that derives the consumers from the
// segments (the read index, an open without a checkpoint) skips the
// consumer frames of segments marked imported in evicted.json (§3.11) and
// applies those of every later segment; their events are verified as any
// (sequence continuity, tip).

// imported returns the ids of the evicted segments a lazy hydrate
// imported (nil: none).
func (e *evictState) imported() map[uint64]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	var m map[uint64]bool
	for id, en := range e.entries {
		if en.Imported {
			if m == nil {
				m = map[uint64]bool{}
			}
			m[id] = true
		}
	}
	return m
}
