package localseg

import (
	"fmt"
	"strings"
)

// Consumers (docs/FORMAT.md §2.7). A durable consumer is created by its first pull of a
// non-empty store (a ConsumerCreate frame, durable before the pull
// returns) and moved by Ack frames. Its cursor never moves backward. Each
// operation validates against the head state (what the frames queued so
// far leave) and returns only once that state is durable, so two
// concurrent calls on one consumer stay consistent with the log order.

// Pull returns up to limit records after the consumer's cursor (clamped to
// the reclaim base), creating the consumer on its first pull of a
// non-empty store. A pull of an empty store answers Exists=false and writes
// nothing. A read-only store serves existing consumers and refuses to
// create one (ErrReadOnly). A first pull reads before it creates: one whose
// read fails answers the error and leaves no consumer behind.
func (s *Store) Pull(consumer string, limit int) (PullResult, error) {
	name, err := validateName("consumer", consumer)
	if err != nil {
		return PullResult{}, err
	}
	if limit < 0 {
		return PullResult{}, fmt.Errorf("%w: negative limit %d", ErrInvalidInput, limit)
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return PullResult{}, ErrClosed
		}
		if s.tip == 0 {
			s.mu.Unlock()
			return PullResult{}, nil
		}
		if h := s.headCons[name]; h != nil {
			cursor := h.cursor
			if err := s.await(h.gen); err != nil {
				return PullResult{}, err
			}
			tip := s.tipA.Load()
			recs, _, err := s.readAfter(cursor, limit)
			if err != nil {
				return PullResult{}, err
			}
			return PullResult{Exists: true, Acked: cursor, Pending: tip - cursor, Records: recs}, nil
		}
		if err := s.createRefusedLocked(name); err != nil {
			s.mu.Unlock()
			return PullResult{}, err
		}
		s.mu.Unlock()
		recs, _, err := s.readAfter(0, limit)
		if err != nil {
			return PullResult{}, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return PullResult{}, ErrClosed
		}
		if s.headCons[name] != nil {
			// A concurrent pull created it while this one read: serve it
			// from its own cursor.
			s.mu.Unlock()
			continue
		}
		if err := s.createRefusedLocked(name); err != nil {
			s.mu.Unlock()
			return PullResult{}, err
		}
		gen := s.enqueueConsumerLocked(KindConsumerCreate, name, 0)
		delete(s.deleted, name)
		s.headCons[strings.Clone(name)] = &headConsumer{gen: gen}
		if err := s.await(gen); err != nil {
			return PullResult{}, err
		}
		s.log.Info("localseg: a pull created a consumer", "dir", s.dir, "consumer", name)
		tip := s.tipA.Load()
		return PullResult{Exists: true, Created: true, Pending: tip, Records: recs}, nil
	}
}

// createRefusedLocked is why a pull may not create consumer name: a store
// that cannot write, or no room for another consumer.
func (s *Store) createRefusedLocked(name string) error {
	if err := s.checkWritableLocked(); err != nil {
		return err
	}
	return s.consumerRoomLocked(name)
}

// Ack moves the consumer's cursor to seq and returns the cursor. Acking at
// or below the cursor (but above 0) is a successful no-op that writes
// nothing; acking 0 or beyond the tip is ErrInvalidState; an unknown
// consumer is ErrUnknownConsumer.
func (s *Store) Ack(consumer string, seq uint64) (uint64, error) {
	name, err := validateName("consumer", consumer)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if err := s.checkWritableLocked(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	h := s.headCons[name]
	var refused error
	switch {
	case h == nil:
		refused = fmt.Errorf("%w: %s", ErrUnknownConsumer, name)
	case seq == 0:
		refused = fmt.Errorf("%w: ack of sequence 0", ErrInvalidState)
	case seq > s.tip:
		refused = fmt.Errorf("%w: ack of %d beyond the tip %d", ErrInvalidState, seq, s.tip)
	case seq <= h.cursor:
		cur := h.cursor
		return cur, s.await(h.gen)
	}
	if refused != nil {
		s.mu.Unlock()
		return 0, refused
	}
	h.gen = s.enqueueConsumerLocked(KindAck, name, seq)
	h.cursor = seq
	return seq, s.await(h.gen)
}

// DeleteConsumer writes a ConsumerDelete frame: the consumer stops bounding
// reclaim and replay forgets it. An unknown consumer is ErrUnknownConsumer.
func (s *Store) DeleteConsumer(consumer string) error {
	name, err := validateName("consumer", consumer)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.checkWritableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.headCons[name] == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownConsumer, name)
	}
	gen := s.enqueueConsumerLocked(KindConsumerDelete, name, 0)
	delete(s.headCons, name)
	s.noteDeletedLocked(name)
	return s.await(gen)
}

// MaxRecentDeletes bounds Snapshot.Deleted: a cursor object write between
// that many deletions keeps every tombstone a restore needs.
const MaxRecentDeletes = 256

// noteDeletedLocked records a ConsumerDelete frame just queued: it follows
// the last event assigned so far (head state). The oldest entry goes when
// the record is full.
func (s *Store) noteDeletedLocked(name string) {
	s.noteDeletedAtLocked(name, max(s.nextSeq, 1)-1)
}

// noteDeletedAtLocked records name deleted with bound at (see
// RecallDeleted).
func (s *Store) noteDeletedAtLocked(name string, at uint64) {
	if s.deleted == nil {
		s.deleted = map[string]uint64{}
	}
	if _, ok := s.deleted[name]; !ok && len(s.deleted) >= MaxRecentDeletes {
		oldest, at := "", ^uint64(0)
		for n, seq := range s.deleted {
			if seq < at || seq == at && n < oldest {
				oldest, at = n, seq
			}
		}
		delete(s.deleted, oldest)
	}
	s.deleted[strings.Clone(name)] = at
}
