package tailbatch

import "math"

// Tombstones of deleted consumers in the cursor object (docs/FORMAT.md §6.6,
// issue 12 finding 6).
//
// A restore trusts the cursor object's consumers for every consumer frame
// positioned before the frame of its shipped_through event S, and replays
// the frames positioned at or after it on top, since they may be newer. A
// ConsumerCreate written after event S and carried to the bucket (a sealed
// segment holds its trailing consumer frames) while the consumer's
// ConsumerDelete is not (it is the last frame of the active segment, and a
// tail object ends at an Event) would bring the deleted consumer back: the
// frames alone cannot tell that the object, written after the delete, is
// the newer word. So the object names the consumers deleted since, with a
// bound T on the position of the delete frame (positioned at or before
// event T), and keeps each tombstone until a write's shipped_through passes
// T: from then on the delete frame, if anything of the consumer's, is
// positioned before event S and the object's word covers it already.

// noTip: the writer does not know its store's tip (WriteCursor,
// SyncCursor): it makes no new tombstone, and carries the stored ones.
const noTip = math.MaxUint64

// tombstones returns the Deleted field of a cursor object about to be
// written over old with the live consumers, a shipped_through of shipped,
// and tip bounding the position of every ConsumerDelete frame written so
// far (noTip: unknown). A consumer old listed (alive or tombstoned), or one
// in seen (names the writer knew alive or deleted since old was written,
// each with a bound of its own, noTip if none), that is not alive now was
// deleted before this write: its delete frame is positioned at or before
// event tip. A tombstone whose bound is below shipped is no
// longer needed; a consumer alive again has none. Without a tip (noTip) only
// old's tombstones are carried.
func tombstones(old Cursor, live map[string]uint64, seen map[string]uint64, tip, shipped uint64) map[string]uint64 {
	var out map[string]uint64
	add := func(name string, bound uint64) {
		if _, ok := live[name]; ok {
			return
		}
		bound = min(bound, tip)
		if bound < shipped {
			return
		}
		if out == nil {
			out = map[string]uint64{}
		}
		// The bound covers the latest delete of the name: the highest.
		out[name] = max(out[name], bound)
	}
	for name, bound := range old.Deleted {
		add(name, bound)
	}
	if tip == noTip {
		return out
	}
	for name := range old.Consumers {
		add(name, tip)
	}
	for name, bound := range seen {
		add(name, bound)
	}
	return out
}
