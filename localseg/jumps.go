package localseg

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
)

// Segment-id jumps (docs/FORMAT.md §3.7). A store's segment ids run
// consecutively from its reclaim base except across a recorded jump: a
// writer that took a shard over continues at its cut's start_segment, and
// a cold load keeps the bucket's ids, gaps included. jumps.json records
// each skipped range durably before any segment above it exists, so an id
// missing anywhere else is still a lost segment (Open refuses it), and a
// missing jumps.json makes the ids above a gap read as lost, never as legal.

// jumpsName is the record of the store's segment-id jumps.
const jumpsName = "jumps.json"

// Jump is a recorded gap in a store's segment ids: no segment From..To-1
// exists, and the segment after From-1 is To.
type Jump struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// nextSegmentID returns the id that follows id: id+1, or past every jump
// that holds it.
func nextSegmentID(jumps []Jump, id uint64) uint64 {
	x := id + 1
	for again := true; again; {
		again = false
		for _, j := range jumps {
			if x >= j.From && x < j.To {
				x, again = j.To, true
			}
		}
	}
	return x
}

// inJump returns the jump whose skipped range holds id.
func inJump(jumps []Jump, id uint64) (Jump, bool) {
	for _, j := range jumps {
		if id >= j.From && id < j.To {
			return j, true
		}
	}
	return Jump{}, false
}

// ReadJumps reads dir's jumps.json (nil when absent). A record that does
// not parse, or whose ranges are empty or overlap, is an error wrapping
// ErrCorrupt: it is durable truth, never guessed around.
func ReadJumps(fsys FS, dir string) ([]Jump, error) {
	b, ok, err := readSmallFile(fsys, dir, jumpsName, 1<<20)
	if err != nil || !ok {
		return nil, err
	}
	name := filepath.Join(dir, jumpsName)
	var raw struct {
		Jumps *[]Jump `json:"jumps"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || raw.Jumps == nil {
		return nil, fmt.Errorf("%w: %s does not parse (%v)", ErrCorrupt, name, err)
	}
	js := *raw.Jumps
	for i, j := range js {
		if j.From == 0 || j.To <= j.From || (i > 0 && j.From < js[i-1].To) {
			return nil, fmt.Errorf("%w: %s: jump %d..%d is empty, or out of order", ErrCorrupt, name, j.From, j.To)
		}
	}
	return js, nil
}

// RecordJump adds the jump [from, to) to dir's jumps.json, durably (temp
// file, fsync, rename, directory fsync), before any segment at or above to
// is created there. A jump already recorded is a no-op.
func RecordJump(fsys FS, dir string, from, to uint64) error {
	if from == 0 || to <= from {
		return fmt.Errorf("%w: segment-id jump %d..%d", ErrInvalidInput, from, to)
	}
	js, err := ReadJumps(fsys, dir)
	if err != nil {
		return err
	}
	j := Jump{From: from, To: to}
	if slices.Contains(js, j) {
		return nil
	}
	if len(js) > 0 && from < js[len(js)-1].To {
		return fmt.Errorf("%w: segment-id jump %d..%d below the last recorded one (%d..%d)", ErrInvalidState, from, to, js[len(js)-1].From, js[len(js)-1].To)
	}
	return writeDurably(fsys, dir, jumpsName, encodeJumps(append(js, j)))
}

func encodeJumps(js []Jump) []byte {
	b := []byte(`{"jumps":[`)
	for i, j := range js {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"from":`...)
		b = strconv.AppendUint(b, j.From, 10)
		b = append(b, `,"to":`...)
		b = strconv.AppendUint(b, j.To, 10)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// checkSegmentIDs refuses retained segment ids that skip an id no recorded
// jump covers (a lost segment file, docs/FORMAT.md §4), before anything is
// changed. It returns the pending jump, if any: a jump recorded by JumpTo
// whose rename did not happen (its From is the highest file, its To
// absent).
func checkSegmentIDs(kept []uint64, base uint64, jumps []Jump) (pending *Jump, err error) {
	prev := base
	for i, id := range kept {
		want := nextSegmentID(jumps, prev)
		if id == want {
			prev = id
			continue
		}
		if j, ok := inJump(jumps, id); ok && j.From == id && want == j.To && i == len(kept)-1 &&
			nextSegmentID(slices.DeleteFunc(slices.Clone(jumps), func(x Jump) bool { return x == j }), prev) == id {
			return &j, nil
		}
		return nil, &CorruptionError{Segment: want, Err: fmt.Errorf("%w: segment file missing (found %d next)%s", ErrCorrupt, id, rebuildHint)}
	}
	return nil, nil
}

// completeJump finishes a jump whose record is durable and whose rename a
// crash cut short: the highest segment moves to the jump's target (the
// same bytes under the id the record promises; a writable open only).
func (s *Store) completeJump(kept []uint64, j *Jump) error {
	if err := s.fs.Rename(s.segPath(j.From), s.segPath(j.To)); err != nil {
		return fmt.Errorf("localseg: finish the jump of segment %d to %d: %w", j.From, j.To, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
	}
	kept[len(kept)-1] = j.To
	return nil
}

// JumpTo makes id the active segment's id (a takeover's start_segment,
// docs/FORMAT.md "Writer fencing", step 9): after writing what is queued,
// it records the jump [active, id) in jumps.json, renames the active
// segment (its frames, the recovered ones of a takeover, with it) to id and
// rewrites the checkpoint. The active segment already at id is a no-op; an
// id below it is ErrInvalidState. Meant for the open path, before reads
// and appends are served: a read located before the jump may miss the
// renamed file.
func (s *Store) JumpTo(id uint64) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkWritableLocked(); err != nil {
		return err
	}
	s.acquireWriterLocked()
	defer func() {
		if ferr := s.finishWriterLocked(); err == nil && ferr != nil {
			err = ferr
		}
	}()
	if err := s.flushLocked(); err != nil {
		return s.poison
	}
	a := s.active()
	switch {
	case a.id == id:
		return nil
	case id < a.id:
		return fmt.Errorf("%w: jump to segment %d: the active segment is %d", ErrInvalidState, id, a.id)
	}
	from := a.id
	s.mu.Unlock()
	err = RecordJump(s.fs, s.dir, from, id)
	if err == nil {
		if err = s.fs.Rename(s.segPath(from), s.segPath(id)); err != nil {
			err = fmt.Errorf("localseg: jump segment %d to %d: %w", from, id, err)
		} else if err = s.fs.SyncDir(s.dir); err != nil {
			err = fmt.Errorf("localseg: fsync directory %s: %w", s.dir, err)
		}
	}
	s.mu.Lock()
	if err != nil {
		s.poisonLocked(err)
		return s.poison
	}
	s.jumps = append(s.jumps, Jump{From: from, To: id})
	a.id = id
	if a.ixb != nil {
		a.ixb.p.id, a.ixb.p.offs.id = id, id
	}
	if s.idx != nil {
		if k := len(s.idx.segs); k > 0 && s.idx.segs[k-1].id == from {
			s.idx.segs[k-1].id = id
		}
	}
	s.readers.drop(from)
	s.log.Info("localseg: the active segment jumped", "dir", s.dir, "from", from, "to", id)
	s.ckptDirty = true
	return nil
}

// segIndexOf returns the position of segment id in s.segs (ids ascend,
// skipping only recorded jumps), or where it would be.
func (s *Store) segIndexOf(id uint64) (int, bool) {
	return slices.BinarySearchFunc(s.segs, id, func(seg *segment, id uint64) int { return cmp.Compare(seg.id, id) })
}
