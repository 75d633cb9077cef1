package localseg

import (
	"fmt"
	"slices"
	"strings"
)

// Group commit.
//
// An appender validates its event without the lock, then under s.mu takes
// the next sequence, encodes its frame into the pending batch (s.pend) and
// notes the batch's generation. It then waits until that generation is
// durable (s.genDone) or the store is poisoned. If nobody holds the writer
// role, it takes it and becomes the leader: it swaps the pending batch for
// an empty one, releases s.mu, places the frames (rolling over where a frame
// would not fit), writes them with one positional write per segment,
// fdatasyncs, re-takes s.mu, publishes the new durable state, writes the
// checkpoint, releases the writer role and wakes everyone. Appenders that
// arrived during the write form the next batch and one of them leads it.
// Each appender returns only after the fdatasync covering its frame.

// Append appends one event; it returns after the fdatasync that covers it.
func (s *Store) Append(ev Event) (AppendResult, error) {
	v, err := validateEvent(&ev)
	if err != nil {
		return AppendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return AppendResult{}, err
	}
	seq := s.nextSeq
	if n := v.frameLen(seq); n > s.maxSeg {
		return AppendResult{}, tooLarge(n, s.maxSeg)
	}
	s.enqueueEventLocked(&v, seq)
	if err := s.awaitLocked(s.pend.gen); err != nil {
		return AppendResult{}, err
	}
	return AppendResult{Seq: seq, Created: seq == 1, Tip: s.tip}, nil
}

// AppendBatch validates every event first, then appends them as one group
// (one fdatasync unless it rolls over) at consecutive sequences. Nothing is
// written when any event is invalid. It returns the first and last
// sequence.
func (s *Store) AppendBatch(evs []Event) (first, last uint64, err error) {
	if len(evs) == 0 {
		return 0, 0, fmt.Errorf("%w: empty batch", ErrInvalidInput)
	}
	vs := make([]validEvent, len(evs))
	for i := range evs {
		if vs[i], err = validateEvent(&evs[i]); err != nil {
			return 0, 0, fmt.Errorf("event %d of the batch: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return 0, 0, err
	}
	first = s.nextSeq
	for i := range vs {
		if n := vs[i].frameLen(first + uint64(i)); n > s.maxSeg {
			return 0, 0, fmt.Errorf("event %d of the batch: %w", i, tooLarge(n, s.maxSeg))
		}
	}
	for i := range vs {
		s.enqueueEventLocked(&vs[i], first+uint64(i))
	}
	if err := s.awaitLocked(s.pend.gen); err != nil {
		return 0, 0, err
	}
	return first, first + uint64(len(vs)) - 1, nil
}

// AppendRecovered appends frames recovered from the bucket through the
// ordinary durable path, as one group. Event sequences must continue the
// tip exactly; consumer frames take effect as they do on replay (an Ack
// also creates its consumer). Every frame is validated before anything is
// written; the frames are re-encoded canonically.
func (s *Store) AppendRecovered(frames []Frame) error {
	if len(frames) == 0 {
		return nil
	}
	type prepared struct {
		ev   validEvent
		name string
	}
	ps := make([]prepared, len(frames))
	for i := range frames {
		f := &frames[i]
		var err error
		switch f.Kind {
		case KindEvent:
			ps[i].ev, err = validateEvent(&Event{ExecutionID: f.ExecutionID, TransactionID: f.TransactionID, Payload: f.Payload})
		case KindConsumerCreate, KindAck, KindConsumerDelete:
			ps[i].name, err = validateName("consumer", f.Consumer)
		default:
			err = fmt.Errorf("%w: unknown frame kind %d", ErrInvalidInput, f.Kind)
		}
		if err != nil {
			return fmt.Errorf("recovered frame %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return err
	}
	next := s.nextSeq
	for i := range frames {
		f := &frames[i]
		switch f.Kind {
		case KindEvent:
			if f.Seq != next {
				return fmt.Errorf("%w: recovered frame %d: event %d does not continue the tip %d", ErrInvalidInput, i, f.Seq, next-1)
			}
			if n := ps[i].ev.frameLen(f.Seq); n > s.maxSeg {
				return fmt.Errorf("recovered frame %d: %w", i, tooLarge(n, s.maxSeg))
			}
			next++
		case KindAck:
			if f.Seq == 0 || f.Seq >= next {
				return fmt.Errorf("%w: recovered frame %d: ack of %s at %d, tip %d", ErrInvalidInput, i, ps[i].name, f.Seq, next-1)
			}
		}
	}
	gen := s.pend.gen
	for i := range frames {
		f := &frames[i]
		if f.Kind == KindEvent {
			s.enqueueEventLocked(&ps[i].ev, f.Seq)
			continue
		}
		name := ps[i].name
		s.enqueueConsumerLocked(f.Kind, name, f.Seq)
		h := s.headCons[name]
		switch f.Kind {
		case KindConsumerCreate:
			if h == nil {
				s.headCons[strings.Clone(name)] = &headConsumer{gen: gen}
			}
		case KindAck:
			if h == nil {
				s.headCons[strings.Clone(name)] = &headConsumer{cursor: f.Seq, gen: gen}
			} else if f.Seq > h.cursor {
				h.cursor, h.gen = f.Seq, gen
			}
		case KindConsumerDelete:
			delete(s.headCons, name)
		}
	}
	return s.awaitLocked(gen)
}

func (s *Store) enqueueEventLocked(v *validEvent, seq uint64) {
	b := s.pend
	start := len(b.buf)
	b.buf = appendEventFrame(b.buf, seq, v.exec, v.txn, v.payload)
	b.items = append(b.items, item{start: start, end: len(b.buf), kind: KindEvent, seq: seq, name: v.exec})
	s.nextSeq = seq + 1
}

func (s *Store) enqueueConsumerLocked(kind FrameKind, name string, seq uint64) uint64 {
	b := s.pend
	start := len(b.buf)
	b.buf = appendConsumerFrame(b.buf, kind, name, seq)
	b.items = append(b.items, item{start: start, end: len(b.buf), kind: kind, seq: seq, name: name})
	return b.gen
}

// awaitLocked waits until group gen is durable, leading the write of a
// group whenever nobody else is. It returns the poison when the group (or
// an earlier one) failed.
func (s *Store) awaitLocked(gen uint64) error {
	for s.genDone < gen {
		if s.poison != nil {
			return s.poison
		}
		if !s.writing {
			s.writing = true
			_ = s.flushLocked()
			s.releaseWriterLocked()
			continue
		}
		s.cond.Wait()
	}
	return nil
}

// flushLocked writes the pending batch as one group. The caller holds
// s.mu and the writer role; s.mu is released during the I/O. An error
// poisons the store.
func (s *Store) flushLocked() error {
	b := s.pend
	if len(b.items) == 0 {
		return nil
	}
	nb := s.spare
	if nb == nil {
		nb = &batch{}
	}
	s.spare = nil
	nb.reset(b.gen + 1)
	s.pend = nb
	s.mu.Unlock()
	err := s.writeBatch(b.buf, b.items)
	s.mu.Lock()
	if err != nil {
		s.poisonLocked(err)
	} else {
		s.genDone = b.gen
	}
	b.reset(0)
	s.spare = b
	return err
}

// writeBatch places the frames of a group, writes and syncs them, and
// publishes them. It runs without s.mu, as the writer.
func (s *Store) writeBatch(buf []byte, items []item) error {
	seg := s.active()
	pos := seg.size
	from := 0
	for i := range items {
		it := &items[i]
		n := int64(it.end - it.start)
		// A frame never spans two segments: a non-empty segment that
		// cannot take the whole frame is sealed first.
		if pos > 0 && pos+n > s.maxSeg {
			if err := s.commitChunk(seg, buf, items[from:i], pos, true); err != nil {
				return err
			}
			seg, pos, from = s.active(), 0, i
		}
		it.seg, it.off = seg, pos
		pos += n
	}
	return s.commitChunk(seg, buf, items[from:], pos, false)
}

// commitChunk writes the frames of items (all in seg, ending at end) and
// makes them durable: by an fdatasync, or, when seal is set, by sealing seg
// (truncate to end, fsync, create and fsync the next segment, fsync the
// directory). It then publishes them and rewrites the checkpoint (fsynced
// after a seal, so the new segment is trusted at the next open).
func (s *Store) commitChunk(seg *segment, buf []byte, items []item, end int64, seal bool) error {
	if len(items) > 0 {
		data := buf[items[0].start:items[len(items)-1].end]
		if _, err := seg.f.WriteAt(data, items[0].off); err != nil {
			return fmt.Errorf("localseg: write segment %d at %d: %w", seg.id, items[0].off, err)
		}
	}
	var next *segment
	if seal {
		var err error
		if next, err = s.rollover(seg, end); err != nil {
			return err
		}
	} else if len(items) > 0 {
		if err := s.datasync(seg.f, false); err != nil {
			return fmt.Errorf("localseg: fdatasync segment %d: %w", seg.id, err)
		}
	}
	s.mu.Lock()
	s.applyLocked(items)
	var info SegmentInfo
	var old File
	if seal {
		seg.size, seg.sealed = end, true
		old, seg.f = seg.f, nil
		info = s.sealedInfoLocked(seg)
		s.segs = append(s.segs, next)
	}
	s.encodeCheckpointLocked()
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	err := s.writeCheckpoint(seal)
	if seal && s.obs != nil {
		s.obs.Sealed(info)
	}
	return err
}

// rollover seals seg at end and creates its successor.
func (s *Store) rollover(seg *segment, end int64) (*segment, error) {
	if err := seg.f.Truncate(end); err != nil {
		return nil, fmt.Errorf("localseg: seal segment %d: truncate: %w", seg.id, err)
	}
	if err := s.datasync(seg.f, true); err != nil {
		return nil, fmt.Errorf("localseg: seal segment %d: fsync: %w", seg.id, err)
	}
	f, err := s.createSegmentFile(seg.id + 1)
	if err != nil {
		return nil, err
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
	}
	return &segment{id: seg.id + 1, known: true, f: f}, nil
}

// applyLocked publishes durable frames: tip, consumers, index, sizes.
func (s *Store) applyLocked(items []item) {
	for i := range items {
		it := &items[i]
		switch it.kind {
		case KindEvent:
			s.tip = it.seq
			if it.seg.known && it.seg.first == 0 {
				it.seg.first = it.seq
			}
			if s.idx != nil {
				s.idx.add(it.seg.id, it.seq, it.off, it.name)
			}
		case KindConsumerCreate:
			if _, ok := s.cons[it.name]; !ok {
				s.addConsLocked(it.name, 0)
			}
		case KindAck:
			if cur, ok := s.cons[it.name]; !ok {
				s.addConsLocked(it.name, it.seq)
			} else if it.seq > cur {
				s.cons[it.name] = it.seq
			}
		case KindConsumerDelete:
			s.delConsLocked(it.name)
		}
	}
	if len(items) > 0 {
		last := &items[len(items)-1]
		if last.seg.size == 0 {
			s.activeSince = s.now()
		}
		last.seg.size = last.off + int64(last.end-last.start)
	}
	s.tipA.Store(s.tip)
}

func (s *Store) addConsLocked(name string, cursor uint64) {
	name = strings.Clone(name)
	s.cons[name] = cursor
	i, _ := slices.BinarySearch(s.consNames, name)
	s.consNames = slices.Insert(s.consNames, i, name)
}

func (s *Store) delConsLocked(name string) {
	if _, ok := s.cons[name]; !ok {
		return
	}
	delete(s.cons, name)
	if i, ok := slices.BinarySearch(s.consNames, name); ok {
		s.consNames = slices.Delete(s.consNames, i, i+1)
	}
}

// Seal seals the active segment when it is non-empty (after writing any
// queued frames): truncated to its logical end, fsynced, its successor
// created and the directory fsynced before it returns.
func (s *Store) Seal() (sealed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return false, err
	}
	s.acquireWriterLocked()
	defer s.releaseWriterLocked()
	return s.sealLocked()
}

// SealIfDue seals the active segment when it is non-empty and older than
// SealMaxAge (measured from its first frame, or from the open).
func (s *Store) SealIfDue() (sealed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return false, err
	}
	if s.sealAge <= 0 || s.active().size == 0 || s.now().Sub(s.activeSince) < s.sealAge {
		return false, nil
	}
	s.acquireWriterLocked()
	defer s.releaseWriterLocked()
	return s.sealLocked()
}

// sealLocked flushes what is queued and seals a non-empty active segment.
// The caller holds s.mu and the writer role.
func (s *Store) sealLocked() (bool, error) {
	if err := s.checkWritableLocked(); err != nil {
		return false, err
	}
	if err := s.flushLocked(); err != nil {
		return false, s.poison
	}
	seg := s.active()
	if seg.size == 0 {
		return false, nil
	}
	s.mu.Unlock()
	err := s.commitChunk(seg, nil, nil, seg.size, true)
	s.mu.Lock()
	if err != nil {
		s.poisonLocked(err)
		return false, s.poison
	}
	return true, nil
}
