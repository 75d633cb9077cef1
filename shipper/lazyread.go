package shipper

import (
	"sort"

	"github.com/bucketlog/bucketlog/localseg"
)

// unreadEvicted reports whether seq lies in the store's evicted segments
// whose events it does not know: a lazy hydrate (coldload Options.Lazy)
// records the older segments unread, so the store's snapshot shows them
// holding no event until a read resolves them. The start's comparison of
// the newest covered tail object with the local store is then skipped: the
// store reads those events from the segment objects themselves, each
// verified against its recorded length and digest on every read; a lazy
// hydrate does not compare overlapping tail objects with them (coldload
// lazy.go says what it does not check).
func (s *Shipper) unreadEvicted(segs []localseg.SegmentInfo, seq uint64) bool {
	ev, ok := s.store.(evicter)
	if !ok {
		return false
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].LastSeq >= seq })
	if i == len(segs) || segs[i].Events != 0 {
		return false
	}
	_, _, evicted := ev.EvictedSegment(segs[i].ID)
	return evicted
}
