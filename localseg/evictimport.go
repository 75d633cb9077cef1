package localseg

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// EvictedSegment is a sealed segment a store being built records as
// evicted without ever holding its file (a lazy hydrate: issue 16,
// "appendable at once"): its length, the xxh64 of its bytes and its first
// event (0: it holds none), as the bucket's object has them. Every remote
// read checks the fetched object against them (remote.go).
type EvictedSegment struct {
	ID    uint64
	Size  int64
	XXH64 uint64
	First uint64
}

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
		case sg.First != 0 && sg.First <= lastFirst:
			return fmt.Errorf("%w: evicted segment %d starts at event %d, an earlier one at %d", ErrInvalidInput, sg.ID, sg.First, lastFirst)
		}
		if sg.First != 0 {
			lastFirst = sg.First
		}
		entries = append(entries, newEvictEntry(sg.ID, sg.Size, sg.XXH64, sg.First))
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
