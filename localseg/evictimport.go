package localseg

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// EvictedSegment is a sealed segment a store being built records as
// evicted without ever holding its file (a lazy hydrate: issue 16,
// "appendable at once"): its length, the xxh64 of its bytes and its first
// event (0: it holds none, or it is not known: a lazy hydrate does not read
// the segment), as the bucket's object has them. Every remote read checks
// the fetched object against them (remote.go); the read index learns the
// segment's events when a read first needs them (lazyindex.go).
type EvictedSegment struct {
	ID    uint64
	Size  int64
	XXH64 uint64
	First uint64
}

// FirstUnknown is the first event evicted.json (docs/FORMAT.md §3.11)
// records for a segment a lazy hydrate imported unread: its events are not
// known until a read fetches it (lazyindex.go).
const FirstUnknown = ^uint64(0)

// ImportEvicted writes evicted.json (docs/FORMAT.md §3.11) into dir, a
// directory being built that no store has opened, naming segs as evicted.
// It decides before it writes a byte: segs must be non-empty, ids ascending
// and unique, sizes positive and non-zero first events ascending; dir must
// hold no evicted.json yet (a record is never replaced here) and no segment
// file of an imported id (an open deletes, unread, a file the record names:
// importing a segment that is on disk would lose it). The record is
// committed like the store's own (temporary file, fsync, rename, directory
// fsync). The store's open then checks it like any record: an entry at or
// above the highest segment file is lost state.
func ImportEvicted(fsys FS, dir string, segs []EvictedSegment) error {
	if len(segs) == 0 {
		return fmt.Errorf("%w: no evicted segment to import", ErrInvalidInput)
	}
	entries := make([]evictEntry, 0, len(segs))
	var lastFirst uint64
	for i, sg := range segs {
		switch {
		case sg.ID == 0 || sg.Size <= 0:
			return fmt.Errorf("%w: evicted segment %d: bad id or size %d", ErrInvalidInput, sg.ID, sg.Size)
		case i > 0 && sg.ID <= segs[i-1].ID:
			return fmt.Errorf("%w: evicted segment %d follows %d: ids must ascend", ErrInvalidInput, sg.ID, segs[i-1].ID)
		case sg.First == FirstUnknown:
			return fmt.Errorf("%w: evicted segment %d: first event %d", ErrInvalidInput, sg.ID, sg.First)
		case sg.First != 0 && sg.First <= lastFirst:
			return fmt.Errorf("%w: evicted segment %d starts at event %d, an earlier one at %d", ErrInvalidInput, sg.ID, sg.First, lastFirst)
		}
		if sg.First != 0 {
			lastFirst = sg.First
		}
		first := sg.First
		if first == 0 {
			first = FirstUnknown // or none: the segment is not read here
		}
		e := newEvictEntry(sg.ID, sg.Size, sg.XXH64, first)
		e.Imported = true // its consumer frames are the checkpoint's (imported.go)
		entries = append(entries, e)
	}
	if _, err := fsys.Stat(filepath.Join(dir, evictedName)); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			return fmt.Errorf("%w: %s already holds %s", ErrInvalidState, dir, evictedName)
		}
		return fmt.Errorf("localseg: stat %s: %w", evictedName, err)
	}
	for _, e := range entries {
		if _, err := fsys.Stat(filepath.Join(dir, SegmentFileName(e.ID))); !errors.Is(err, fs.ErrNotExist) {
			if err == nil {
				return fmt.Errorf("%w: segment %d is on disk in %s; only a segment never local is imported as evicted", ErrInvalidState, e.ID, dir)
			}
			return fmt.Errorf("localseg: stat segment %d: %w", e.ID, err)
		}
	}
	return writeDurably(fsys, dir, evictedName, encodeEvictRecord(entries))
}

// ImportCheckpoint writes checkpoint.json (docs/FORMAT.md §3.4) for a store
// being built whose older segments ImportEvicted named, so its first open
// trusts it (O(1): no replay, which would fetch every evicted segment from
// the bucket to rebuild the tip and the consumers). The tip is not taken
// from the caller: it is the last event of the newest local segment file
// holding one, each read and verified (frame by frame) from the disk;
// consumers (name → cursor) must not point past it. The highest segment
// file is the active one, its whole length the logical length (a restore
// writes frames only). It refuses, before writing, a directory that holds
// a checkpoint already or no evicted.json, and one whose local segment
// files hold no event while evicted segments do (the tip would be unknown:
// a lazy hydrate keeps the newest segment holding an event local).
func ImportCheckpoint(fsys FS, dir string, consumers map[string]uint64) error {
	if _, err := fsys.Stat(filepath.Join(dir, checkpointName)); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			return fmt.Errorf("%w: %s already holds %s", ErrInvalidState, dir, checkpointName)
		}
		return fmt.Errorf("localseg: stat %s: %w", checkpointName, err)
	}
	entries, err := readEvictRecord(fsys, dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return fmt.Errorf("%w: %s names no evicted segment: a store without one needs no imported checkpoint", ErrInvalidState, dir)
	}
	m, err := ReadReclaimManifest(fsys, dir)
	if err != nil {
		return err
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("localseg: list %s: %w", dir, err)
	}
	kept, _, _, _ := classifyNames(names, m.ReclaimedThroughSegment)
	if len(kept) == 0 || kept[len(kept)-1] <= entries[len(entries)-1].ID {
		return fmt.Errorf("%w: %s: no segment file above the evicted segments", ErrInvalidState, dir)
	}
	var tip uint64
	var activeLen int64
	for i := len(kept) - 1; i >= 0 && tip == 0; i-- {
		b, err := readSegmentFile(fsys, dir, kept[i])
		if err != nil {
			return err
		}
		if i == len(kept)-1 {
			activeLen = int64(len(b))
		}
		sum, err := VerifySegment(kept[i], b, 0)
		if err != nil {
			return fmt.Errorf("localseg: segment %d: %w", kept[i], err)
		}
		if sum.Events > 0 {
			tip = sum.LastSeq
		}
	}
	if tip == 0 {
		return fmt.Errorf("%w: %s: no local segment holds an event, so the tip above the evicted segments is unknown", ErrInvalidState, dir)
	}
	for name, c := range consumers {
		if c > tip {
			return fmt.Errorf("%w: consumer %q at %d is past the tip %d", ErrInvalidInput, name, c, tip)
		}
	}
	cons := maps.Clone(consumers)
	if cons == nil {
		cons = map[string]uint64{}
	}
	b := appendCheckpoint(nil, tip, kept[len(kept)-1], activeLen, slices.Sorted(maps.Keys(cons)), cons)
	return writeDurably(fsys, dir, checkpointName, b)
}

// readSegmentFile reads segment id's whole file in dir.
func readSegmentFile(fsys FS, dir string, id uint64) ([]byte, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, SegmentFileName(id)), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("localseg: open segment %d: %w", id, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("localseg: stat segment %d: %w", id, err)
	}
	if st.Size() > maxSegmentFile {
		return nil, fmt.Errorf("%w: segment %d is %d bytes", ErrCorrupt, id, st.Size())
	}
	b := make([]byte, st.Size())
	if err := readFull(f, b, 0); err != nil {
		return nil, fmt.Errorf("localseg: read segment %d: %w", id, err)
	}
	return b, nil
}
