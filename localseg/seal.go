package localseg

import "fmt"

// overlapIndexMin is the size of a group from which its index-file
// bookkeeping runs beside its fdatasync.
const overlapIndexMin = 32 << 10

// indexAlongside runs durable (the chunk's fdatasync, or the seal) and adds
// the chunk's frames, which buf holds, to the segment's index-file builder.
// A large chunk is added on another goroutine while durable waits, not
// after it, where it would delay every append of the group; a small one
// costs less than a goroutine. A builder that cannot take the frames is
// dropped (the segment then gets no index file from the writer). The caller
// holds the writer role, the only owner of seg.ixb.
func (seg *segment) indexAlongside(buf []byte, items []item, durable func() error) error {
	ixb := seg.ixb
	if ixb == nil || len(items) == 0 {
		return durable()
	}
	var ok bool
	var err error
	if items[len(items)-1].end-items[0].start >= overlapIndexMin {
		done := make(chan bool, 1)
		go func() { done <- ixb.add(buf, items) }()
		err = durable()
		ok = <-done
	} else if err = durable(); err == nil {
		ok = ixb.add(buf, items)
	}
	if !ok {
		seg.ixb = nil
	}
	return err
}

// sealFile truncates seg to end and fsyncs it: from then on its frames are
// durable (a rollover's first half).
func (s *Store) sealFile(seg *segment, end int64) error {
	if err := seg.f.Truncate(end); err != nil {
		return fmt.Errorf("localseg: seal segment %d: truncate: %w", seg.id, err)
	}
	if err := s.datasync(seg.f, true); err != nil {
		return fmt.Errorf("localseg: seal segment %d: fsync: %w", seg.id, err)
	}
	return nil
}

// successor creates the segment after seg (the spare renamed into place,
// or a new file) and fsyncs the directory: a rollover's second half.
func (s *Store) successor(seg *segment) (*segment, error) {
	f, err := s.takeSpare(seg.id + 1)
	if err != nil {
		return nil, err
	}
	if f == nil {
		if f, err = s.createSegmentFile(seg.id + 1); err != nil {
			return nil, err
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
	}
	return &segment{id: seg.id + 1, known: true, f: f, ixb: newSegIdxBuilder(seg.id + 1)}, nil
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
	sealed, err = s.sealLocked()
	if ferr := s.finishWriterLocked(); err == nil && ferr != nil {
		return false, ferr
	}
	return sealed, err
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
	sealed, err = s.sealLocked()
	if ferr := s.finishWriterLocked(); err == nil && ferr != nil {
		return false, ferr
	}
	return sealed, err
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
	if s.latePoison != nil {
		s.applyLatePoisonLocked()
		return true, s.poison
	}
	return true, nil
}
