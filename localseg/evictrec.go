package localseg

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// evicted.json: the durable record of the sealed segments that left the
// disk because their bucket copies are durable (evict.go). It is durable
// local state, written like reclaim.json (writeDurably: temporary file,
// fsync, rename, directory fsync) before any segment it names is
// unlinked, and trusted: a record that does not parse is corruption.
//
//	{"segments":[{"id":N,"size":N,"xxh64":"<016x>","first":N[,"imported":true]},…]}
//
// first is the segment's first event (0: it holds none); imported marks a
// segment a lazy hydrate recorded (docs/FORMAT.md §3.11, imported.go). Entries at or
// below reclaim.json are stale (a reclaim went past them) and ignored.
const evictedName = "evicted.json"

// evictEntry is one evicted segment: what its bytes were when it left the
// disk. A fetched copy must have exactly this length and digest.
type evictEntry struct {
	ID    uint64 `json:"id"`
	Size  int64  `json:"size"`
	XXH64 string `json:"xxh64"`
	First uint64 `json:"first"`
	// Imported: a lazy hydrate recorded the segment (ImportEvicted), and
	// the consumer state it imported stands for its consumer frames
	// (imported.go).
	Imported bool `json:"imported,omitempty"`

	digest uint64
}

type evictRecord struct {
	Segments []evictEntry `json:"segments"`
}

// readEvictRecord reads evicted.json (empty when absent).
func readEvictRecord(fsys FS, dir string) ([]evictEntry, error) {
	b, ok, err := readSmallFile(fsys, dir, evictedName, 64<<20)
	if err != nil || !ok {
		return nil, err
	}
	return parseEvictRecord(b)
}

// parseEvictRecord parses evicted.json strictly: every field present, ids
// ascending and unique, sizes positive, digests 16 lowercase hex digits.
func parseEvictRecord(b []byte) ([]evictEntry, error) {
	var raw struct {
		Segments []struct {
			ID       *uint64 `json:"id"`
			Size     *int64  `json:"size"`
			XXH64    *string `json:"xxh64"`
			First    *uint64 `json:"first"`
			Imported bool    `json:"imported"`
		} `json:"segments"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, evictedName, err)
	}
	if raw.Segments == nil {
		return nil, fmt.Errorf("%w: %s misses its segments", ErrCorrupt, evictedName)
	}
	out := make([]evictEntry, 0, len(raw.Segments))
	for _, r := range raw.Segments {
		if r.ID == nil || r.Size == nil || r.XXH64 == nil || r.First == nil {
			return nil, fmt.Errorf("%w: %s: an entry misses a field", ErrCorrupt, evictedName)
		}
		d, err := strconv.ParseUint(*r.XXH64, 16, 64)
		if err != nil || len(*r.XXH64) != 16 || *r.XXH64 != fmt.Sprintf("%016x", d) {
			return nil, fmt.Errorf("%w: %s: segment %d: bad xxh64 %q", ErrCorrupt, evictedName, *r.ID, *r.XXH64)
		}
		if *r.ID == 0 || *r.Size <= 0 || (len(out) > 0 && *r.ID <= out[len(out)-1].ID) {
			return nil, fmt.Errorf("%w: %s: segment %d: bad id or size", ErrCorrupt, evictedName, *r.ID)
		}
		out = append(out, evictEntry{ID: *r.ID, Size: *r.Size, XXH64: *r.XXH64, First: *r.First, Imported: r.Imported, digest: d})
	}
	return out, nil
}

func encodeEvictRecord(entries []evictEntry) []byte {
	b, _ := json.Marshal(evictRecord{Segments: entries})
	return append(b, '\n')
}

func newEvictEntry(id uint64, size int64, digest, first uint64) evictEntry {
	return evictEntry{ID: id, Size: size, XXH64: fmt.Sprintf("%016x", digest), First: first, digest: digest}
}

// mergeEvicted joins the evicted segments the record names to the segment
// files recovery listed (kept, ascending, above the reclaim base), before
// anything is changed. An evicted segment is accepted in place of a
// missing file only because the record names it; an entry at or above the
// highest file (the active segment is never evicted), or any entry with no
// file at all left, is lost state. It returns the ids of the whole store
// (ascending) and the files of evicted segments a crash left before their
// unlink (swept like reclaim leftovers).
func (s *Store) mergeEvicted(kept []uint64) (all []uint64, sweep []string, err error) {
	entries, err := readEvictRecord(s.fs, s.dir)
	if err != nil || len(entries) == 0 {
		return kept, nil, err
	}
	entries = slices.DeleteFunc(entries, func(e evictEntry) bool { return e.ID <= s.reclaimedSeg })
	if len(entries) == 0 {
		return kept, nil, nil
	}
	if len(kept) == 0 {
		return nil, nil, s.lostState(fmt.Sprintf("%s names %d evicted segments (through %d), but no segment file exists", evictedName, len(entries), entries[len(entries)-1].ID))
	}
	highest := kept[len(kept)-1]
	ids := make(map[uint64]bool, len(kept))
	for _, id := range kept {
		ids[id] = true
	}
	all = slices.Clone(kept)
	for _, e := range entries {
		if e.ID >= highest {
			return nil, nil, s.lostState(fmt.Sprintf("%s names segment %d evicted, the highest segment file is %d (the active segment is never evicted)", evictedName, e.ID, highest))
		}
		if ids[e.ID] {
			sweep = append(sweep, SegmentFileName(e.ID))
		} else {
			all = append(all, e.ID)
		}
	}
	slices.Sort(all)
	s.ev.setEntries(entries)
	return all, sweep, nil
}
