package localseg

import (
	"fmt"
	"slices"
)

// Appends checked against the transaction window (txwindow.go).

// duplicateLocked answers an append whose transaction id the window holds
// at e: refused when its content differs, else the original's outcome once
// the original is durable (it may still be queued or in flight: the retry
// then shares its group's outcome). The caller holds s.mu, which is
// released.
func (s *Store) duplicateLocked(v *validEvent, e txEntry) (AppendResult, error) {
	if e.content != v.content {
		s.mu.Unlock()
		return AppendResult{}, conflict(v.txn, e.seq)
	}
	if err := s.awaitSeqLocked(e.seq); err != nil {
		return AppendResult{}, err
	}
	return AppendResult{Seq: e.seq, Created: e.seq == 1, Tip: s.tipA.Load(), Duplicate: true}, nil
}

// awaitSeqLocked returns once sequence seq is durable, or with the error of
// the group that carried it. The caller holds s.mu, which is released.
func (s *Store) awaitSeqLocked(seq uint64) error {
	if seq <= s.tip {
		s.mu.Unlock()
		return nil
	}
	// Queued or in flight: waiting for the newest non-empty group covers
	// it (groups become durable in order).
	gen := s.pend.gen
	if len(s.pend.items) == 0 {
		if s.flight == nil {
			// Not durable, not queued: its group failed.
			err := s.poison
			s.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("%w: sequence %d is neither durable nor queued", ErrPoisoned, seq)
			}
			return err
		}
		gen = s.flight.gen
	}
	if err := s.await(gen); err != nil && s.tipA.Load() < seq {
		return err
	}
	return nil
}

func conflict(txn string, seq uint64) error {
	return fmt.Errorf("%w: %s is held by sequence %d with another execution id or payload (a retry must send the same event; a new event needs a new transaction id)", ErrTransactionConflict, quoteShort(txn), seq)
}

// AppendBatch is AppendEvents answering the sequences written: first..last
// (both 0 when every event was a duplicate).
func (s *Store) AppendBatch(evs []Event) (first, last uint64, err error) {
	r, err := s.AppendEvents(evs)
	return r.First, r.Last, err
}

// AppendEvents validates every event first, then appends them as one group
// (one fdatasync unless it rolls over) at consecutive sequences. Nothing is
// written when any event is invalid or reuses a transaction id with other
// content (ErrTransactionConflict, naming the event and the sequence). An
// event whose transaction id is in the window with the same content, or
// repeats one earlier in the batch, is not written: it is listed in
// Duplicates with the sequence that holds it. When the group fails after a
// seal's fsync covered a prefix of the batch, the error comes with
// First..Last naming that durable prefix (Last below the batch's end); on
// any other error the result is empty.
func (s *Store) AppendEvents(evs []Event) (BatchResult, error) {
	if len(evs) == 0 {
		return BatchResult{}, fmt.Errorf("%w: empty batch", ErrInvalidInput)
	}
	vs := make([]validEvent, len(evs))
	for i := range evs {
		var err error
		if vs[i], err = validateEvent(&evs[i]); err != nil {
			return BatchResult{}, fmt.Errorf("event %d of the batch: %w", i, err)
		}
		s.txns.hash(&vs[i])
	}
	s.mu.Lock()
	if err := s.checkWritableLocked(); err != nil {
		s.mu.Unlock()
		return BatchResult{}, err
	}
	// Every event is decided before any is queued: a batch is refused whole.
	var res BatchResult
	seqs := make([]uint64, len(vs))
	dup := make([]bool, len(vs))
	var inBatch map[txKey]int // the batch's new events by transaction id
	if s.txns != nil {
		inBatch = make(map[txKey]int)
	}
	next, waitFor := s.nextSeq, uint64(0)
	for i := range vs {
		v := &vs[i]
		if j, ok := inBatch[v.key]; ok {
			if vs[j].content != v.content {
				s.mu.Unlock()
				return BatchResult{}, fmt.Errorf("event %d of the batch: %w", i, conflict(v.txn, seqs[j]))
			}
			seqs[i], dup[i] = seqs[j], true
			continue
		}
		if e, ok := s.txns.lookup(v); ok {
			if e.content != v.content {
				s.mu.Unlock()
				return BatchResult{}, fmt.Errorf("event %d of the batch: %w", i, conflict(v.txn, e.seq))
			}
			seqs[i], dup[i] = e.seq, true
			waitFor = max(waitFor, e.seq)
			continue
		}
		if n := v.frameLen(next); n > s.maxSeg {
			s.mu.Unlock()
			return BatchResult{}, fmt.Errorf("event %d of the batch: %w", i, tooLarge(n, s.maxSeg))
		}
		if inBatch != nil {
			inBatch[v.key] = i
		}
		seqs[i] = next
		next++
	}
	for i := range vs {
		if dup[i] {
			res.Duplicates = append(res.Duplicates, Duplicate{Index: i, Seq: seqs[i]})
		} else {
			s.enqueueEventLocked(&vs[i], seqs[i])
		}
	}
	if len(res.Duplicates) == len(vs) {
		// Nothing new: only the originals' outcome is awaited.
		if err := s.awaitSeqLocked(waitFor); err != nil {
			return BatchResult{}, err
		}
		return res, nil
	}
	first, last := next-uint64(len(vs)-len(res.Duplicates)), next-1
	if err := s.await(s.pend.gen); err != nil {
		switch tip := s.tipA.Load(); {
		case tip >= last:
			// Durable before the group failed (see Append).
		case tip >= first:
			// A seal's fsync covered a prefix of the batch before the
			// group failed: that prefix is durable and is answered as
			// such with the error, so a retry sends only the rest.
			res.First, res.Last = first, tip
			res.Duplicates = slices.DeleteFunc(res.Duplicates, func(d Duplicate) bool { return d.Seq > tip })
			return res, fmt.Errorf("%w (sequences %d..%d of the batch are durable, the rest were not written)", err, first, tip)
		default:
			return BatchResult{}, err
		}
	}
	res.First, res.Last = first, last
	return res, nil
}

// MaxSeq is the highest sequence the result names (written or holding a
// duplicate): what a caller waits for to see the whole batch durable
// elsewhere.
func (r BatchResult) MaxSeq() uint64 {
	m := r.Last
	for _, d := range r.Duplicates {
		m = max(m, d.Seq)
	}
	return m
}
