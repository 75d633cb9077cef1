package localseg

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog/frame"
)

// Group commit.
//
// An appender validates its event without the lock, then under s.mu takes
// the next sequence, encodes its frame into the pending batch (s.pend) and
// waits for that group (await). If nobody holds the writer role, it takes
// it and leads: it swaps the pending batch for an empty one, releases s.mu,
// places the frames (rolling over where a frame would not fit), writes them
// with one positional write per segment, fdatasyncs, re-takes s.mu,
// publishes the new durable state and closes the group's done channel,
// which wakes its members without making them take s.mu again. Appenders
// that arrive while a group is being written queue into the next one: the
// first parks on the group's lead channel, the others on its done channel.
// A leader that finds the next group non-empty hands it the writer role
// (heir) and wakes only its parked leader, which writes it at once; so a
// group's fsync starts one wake-up after the previous one ends, and a
// goroutine leads at most one group per append. Seal, Reclaim and Close
// wait for the role on s.cond; a leader that sees them waiting releases the
// role instead of handing it on.
//
// checkpoint.json is written by the leader after its group's members were
// woken (off their acknowledgement path), when the writer goes idle, or
// during an unbroken chain of groups at most every checkpointMaxLag; at
// every seal (fsynced) and at Close. It is always encoded from the durable
// state, so it never claims a frame that no completed fdatasync covers; a
// lagging one costs a replay from its active_len (docs/FORMAT.md §4.3). Each appender
// returns only after the fdatasync covering its frame.

// Append appends one event; it returns after the fdatasync that covers it.
func (s *Store) Append(ev Event) (AppendResult, error) {
	v, err := validateEvent(&ev)
	if err != nil {
		return AppendResult{}, err
	}
	s.txns.hash(&v)
	s.mu.Lock()
	if err := s.checkWritableLocked(); err != nil {
		s.mu.Unlock()
		return AppendResult{}, err
	}
	if e, ok := s.txns.lookup(&v); ok {
		return s.duplicateLocked(&v, e) // the check and the queuing are one step under s.mu
	}
	seq := s.nextSeq
	if n := v.frameLen(seq); n > s.maxSeg {
		s.mu.Unlock()
		return AppendResult{}, tooLarge(n, s.maxSeg)
	}
	s.enqueueEventLocked(&v, seq)
	if err := s.await(s.pend.gen); err != nil && s.tipA.Load() < seq {
		return AppendResult{}, err
	}
	// A group that failed after the fsync covering this frame (a seal's
	// fsync, then the successor's creation) published it: it is durable,
	// and reporting it failed would make a retry store it twice.
	return AppendResult{Seq: seq, Created: seq == 1, Tip: s.tipA.Load()}, nil
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
			s.txns.hash(&ps[i].ev)
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
	if err := s.checkWritableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	next := s.nextSeq
	for i := range frames {
		f := &frames[i]
		var err error
		switch f.Kind {
		case KindEvent:
			if f.Seq != next {
				err = fmt.Errorf("%w: recovered frame %d: event %d does not continue the tip %d", ErrInvalidInput, i, f.Seq, next-1)
			} else if n := ps[i].ev.frameLen(f.Seq); n > s.maxSeg {
				err = fmt.Errorf("recovered frame %d: %w", i, tooLarge(n, s.maxSeg))
			}
			next++
		case KindAck:
			if f.Seq == 0 || f.Seq >= next {
				err = fmt.Errorf("%w: recovered frame %d: ack of %s at %d, tip %d", ErrInvalidInput, i, ps[i].name, f.Seq, next-1)
			}
		}
		if err != nil {
			s.mu.Unlock()
			return err
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
	return s.await(gen)
}

func (s *Store) enqueueEventLocked(v *validEvent, seq uint64) {
	b := s.pend
	start := len(b.buf)
	b.buf = v.appendFrame(b.buf, seq)
	b.items = append(b.items, item{start: start, end: len(b.buf), kind: KindEvent, seq: seq, name: v.exec, esc: v.escTxn || v.escPayload})
	s.nextSeq = seq + 1
	s.txns.add(v, seq)
}

func (s *Store) enqueueConsumerLocked(kind FrameKind, name string, seq uint64) uint64 {
	b := s.pend
	start := len(b.buf)
	b.buf = frame.AppendConsumer(b.buf, kind, name, seq)
	b.items = append(b.items, item{start: start, end: len(b.buf), kind: kind, seq: seq, name: name})
	return b.gen
}

// await waits until group gen is durable and returns nil, or returns the
// poison when that group (or an earlier one) failed. It is called with s.mu
// held and returns with s.mu released.
//
// A waiter of the pending group leads it when the writer role is free or
// was handed to that group; otherwise the first one parks on the group's
// lead channel and the others on its done channel (as do waiters of the
// group in flight). Any goroutine woken re-checks everything under s.mu, so
// a wake-up that lost a race (another appender consumed the hand-off, or
// Seal took the role and wrote the group itself) is harmless. Whenever the
// pending group is non-empty while the role is held, an appender is parked
// on its lead channel or on its way back to s.mu, and every holder of the
// role wakes it when it lets go.
//
// A group is durable once its fdatasync completed: what a leader does after
// it (the checkpoint write, preparing the spare) never fails the group's
// members, it can only poison the store for later groups.
func (s *Store) await(gen uint64) error {
	for {
		switch {
		case s.genDone >= gen:
			s.mu.Unlock()
			return nil
		case s.poison != nil:
			if s.heir == gen {
				// The role was handed to this group and the store was
				// poisoned before its leader took it: nothing
				// more will be written; give the role back so Close can
				// take it.
				s.heir = 0
				s.releaseWriterLocked()
			}
			err := s.poison
			s.mu.Unlock()
			return err
		}
		b := s.pend
		if b.gen == gen {
			switch {
			case s.heir == gen:
				s.heir = 0 // the role was handed to this group
				s.leadLocked()
				s.prepareSpareLocked()
				continue
			case !s.writing:
				s.writing = true
				s.leadLocked()
				s.prepareSpareLocked()
				continue
			case b.lead == nil:
				b.lead = make(chan struct{})
				ch := b.lead
				s.mu.Unlock()
				<-ch
				s.mu.Lock()
				continue
			}
		} else {
			b = s.flight // genDone < gen < pend.gen: the group in flight
		}
		if b.done == nil {
			b.done = make(chan struct{})
		}
		ch := b.done
		s.mu.Unlock()
		<-ch
		if s.genDoneA.Load() >= gen {
			return nil
		}
		s.mu.Lock()
	}
}

// leadLocked writes the pending group (the caller holds the writer role)
// and then passes the role on. It returns the error of the group, or of a
// checkpoint write after it.
func (s *Store) leadLocked() error {
	if err := s.flushLocked(); err != nil {
		s.releaseWriterLocked()
		return s.poison
	}
	return s.passWriterLocked()
}

// passWriterLocked ends a leader's turn: it writes the checkpoint when the
// writer goes idle (or a chain of groups has left it checkpointMaxLag
// behind), then hands the role to the pending group's parked leader, or
// releases it when nothing is queued or Seal, Reclaim or Close wait for it.
func (s *Store) passWriterLocked() error {
	var err error
	if s.ckptDirty && s.poison == nil &&
		(len(s.pend.items) == 0 || s.roleWaiters > 0 || time.Since(s.ckptAt) >= checkpointMaxLag) {
		err = s.writeCheckpointLocked()
	}
	if p := s.pend; len(p.items) > 0 && s.poison == nil && s.roleWaiters == 0 {
		s.heir = p.gen
		p.wakeLeader()
		return err
	}
	s.releaseWriterLocked()
	return err
}

// flushLocked writes the pending batch as one group and wakes its
// waiters. The caller holds s.mu and the writer role; s.mu is released
// during the I/O. An error poisons the store.
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
	s.flight = b
	s.mu.Unlock()
	err := s.writeBatch(b.buf, b.items)
	s.mu.Lock()
	s.flight = nil
	if err != nil {
		s.poisonLocked(err)
	} else {
		s.genDone = b.gen
		s.genDoneA.Store(b.gen)
	}
	s.applyLatePoisonLocked()
	b.wakeAll()
	b.reset(0)
	s.spare = b
	return err
}

// applyLatePoisonLocked poisons the store with a failure recorded during
// the group just written, after the fsync that made its frames durable
// (see commitChunk): the group succeeds, later appends fail.
func (s *Store) applyLatePoisonLocked() {
	if err := s.latePoison; err != nil {
		s.latePoison = nil
		s.poisonLocked(err)
	}
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
			// The seal's checkpoint is the durable record that the
			// successor exists: without it no frame goes there (losing
			// that file would leave no evidence, see checkNothingMissing).
			// The sealed frames stay published; the rest fail.
			s.mu.Lock()
			late := s.latePoison
			s.mu.Unlock()
			if late != nil {
				return late
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
// directory). It then publishes them. After a seal it rewrites and fsyncs
// the checkpoint, so the new segment is trusted at the next open; otherwise
// it only marks the checkpoint behind (the leader writes it later).
func (s *Store) commitChunk(seg *segment, buf []byte, items []item, end int64, seal bool) error {
	if len(items) > 0 {
		data := buf[items[0].start:items[len(items)-1].end]
		if _, err := seg.f.WriteAt(data, items[0].off); err != nil {
			return fmt.Errorf("localseg: write segment %d at %d: %w", seg.id, items[0].off, err)
		}
	}
	var next *segment
	sealedOK := false // the seal's fsync covered the frames
	err := seg.indexAlongside(buf, items, func() (err error) {
		if seal {
			if err = s.sealFile(seg, end); err != nil {
				return err
			}
			sealedOK = true
			next, err = s.successor(seg)
			return err
		}
		if len(items) == 0 {
			return nil
		}
		if err := s.datasync(seg.f, false); err != nil {
			return fmt.Errorf("localseg: fdatasync segment %d: %w", seg.id, err)
		}
		return nil
	})
	if err != nil {
		if sealedOK && len(items) > 0 {
			// The frames are durable although the successor could not
			// be made: publish them, so their appenders are answered
			// with success (the caller poisons the store; seg stays the
			// active segment, at its logical end).
			s.mu.Lock()
			s.applyLocked(items)
			s.ckptDirty = true
			s.mu.Unlock()
		}
		return err
	}
	if seal {
		// Before the seal is published, so no replay can see the segment
		// sealed without it and write it too.
		if data := seg.ixb.finish(end); data != nil {
			if err := writeSegIndex(s.fs, s.dir, seg.id, data); err != nil {
				s.log.Debug("localseg: index file not written (the next replay reads the segment in full)", "dir", s.dir, "segment", seg.id, "err", err)
			}
		}
		seg.ixb = nil
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
		s.encodeCheckpointLocked()
	} else {
		s.ckptDirty = true
	}
	s.mu.Unlock()
	if !seal {
		return nil
	}
	old.Close()
	if err := s.writeCheckpoint(true); err != nil {
		// The seal and the frames are durable: a checkpoint is a cache
		// (the next open replays). The failure poisons the store once
		// the group in flight is published (a write error is a write
		// error, docs/FORMAT.md §4.1), so only later appends fail.
		s.mu.Lock()
		if s.latePoison == nil {
			s.latePoison = err
		}
		s.mu.Unlock()
	}
	if s.obs != nil {
		s.obs.Sealed(info)
	}
	return nil
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
	if s.tipA.Swap(s.tip) != s.tip {
		s.notice.broadcast()
	}
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
