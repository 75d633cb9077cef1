package tailbatch

import (
	"cmp"
	"slices"

	"github.com/bucketlog/bucketlog/blobtier"
)

// SegRange is the Event sequence range of a sealed segment that is durable
// in the bucket (its object's length and digest equal the local bytes). A
// segment holding no event has LastSeq < FirstSeq and covers nothing.
type SegRange struct {
	FirstSeq, LastSeq uint64
}

// CursorFrom returns the tail cursor of shard at start (docs/FORMAT.md §7.2) from a
// listing of its tail objects already made (a bucket view's, so no request
// here): the highest sequence covered contiguously from base by durableSegs
// and the tail objects. base is what needs no coverage (the reclaim
// watermark's sequence, or 0). The local tip plays no part: events
// acknowledged just before a crash, durable only on the local disk, lie
// above the result and ship on the next pass.
//
// Only tail keys of this shard are considered. A key that does not parse, or
// parses to another kind or shard, is ignored (kept and counted by tail
// cleanup, never trusted here). A tail object is trusted by its key: it was
// created whole by one create-if-absent put, and a cold load verifies its
// bytes before using them. A listing that failed must not be replaced by the
// local tip: the caller returns its error.
func CursorFrom(shard uint32, base uint64, durableSegs []SegRange, tails []blobtier.ObjectInfo) uint64 {
	ranges := make([]SegRange, 0, len(durableSegs)+len(tails))
	for _, s := range durableSegs {
		if s.LastSeq >= s.FirstSeq {
			ranges = append(ranges, s)
		}
	}
	for _, info := range tails {
		k := info.Parsed
		if info.ParseErr != nil || k.Kind != blobtier.KindTail || k.Shard != shard || k.LastSeq < k.FirstSeq || k.FirstSeq == 0 || info.Size <= 0 {
			continue
		}
		ranges = append(ranges, SegRange{FirstSeq: k.FirstSeq, LastSeq: k.LastSeq})
	}
	return contiguousFrom(base, ranges)
}

// contiguousFrom extends base over ranges while they leave no gap: sorted by
// first sequence, a range extends the covered prefix only when it starts at
// or before covered+1; the first one that starts further ends the walk,
// since every later one starts further still.
func contiguousFrom(base uint64, ranges []SegRange) uint64 {
	slices.SortFunc(ranges, func(a, b SegRange) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
	covered := base
	for _, r := range ranges {
		if r.FirstSeq > covered+1 {
			break
		}
		covered = max(covered, r.LastSeq)
	}
	return covered
}
