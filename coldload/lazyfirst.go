package coldload

import (
	"context"
	"errors"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/frame"
)

// A lazy hydrate learns where each remote segment's events start from the
// head of its object (one ranged GET, blobtier.RangeGetter, of
// firstProbeBytes; up to firstProbeMax when consumer frames or a long
// first event need more): the sequence of the first event frame, its
// header, CRC and body checked (frame.Decode). It is a hint, never more:
// the firsts must ascend with the ids, lie above the reclaim base and
// below the first local event (plausibleFirsts), or the segment's first
// stays unknown (localseg.FirstUnknown) and an owner's open resolves it
// by a full fetch as before. A ranged read that fails, is short or long,
// or holds no intact event frame leaves it unknown the same way; it never
// fails the hydrate. Every remote read later checks the whole object
// against its digest and its events running on from the recorded first
// (localseg remote.go), so a wrong hint can make a read fail, never make
// it return other events.

const (
	firstProbeBytes = 4 << 10
	firstProbeMax   = 256 << 10
)

// firstEventHint returns the first event of the segment object key of size
// bytes read from its head through rg, or 0 when it could not learn it.
func firstEventHint(ctx context.Context, rg blobtier.RangeGetter, key string, size int64) (seq uint64, reads int) {
	for n := int64(firstProbeBytes); ; n *= 4 {
		n = min(n, size)
		b, err := rg.GetRange(ctx, key, 0, n)
		reads++
		if err != nil || int64(len(b)) != n {
			return 0, reads
		}
		more := false
		for o := 0; o < len(b); {
			f, fn, err := frame.Decode(b[o:])
			if err != nil {
				more = errors.Is(err, frame.ErrShortHeader) || errors.Is(err, frame.ErrShortBody)
				break
			}
			if f.Kind == frame.KindEvent {
				return f.Seq, reads
			}
			o += fn
			more = o == len(b)
		}
		if !more || n >= size || n >= firstProbeMax {
			return 0, reads
		}
	}
}

// plausibleFirsts clears (to 0: unknown) every hint of firsts (one per
// remote segment, ascending ids without a hole; 0 = none learned) that does
// not fit: each kept one above base (the reclaim watermark's sequence) and
// below next (the first local event), above every earlier hint and below
// every later one (two hints out of order are both dropped: either could
// be the wrong one).
func plausibleFirsts(firsts []uint64, base, next uint64) {
	for i, f := range firsts {
		if f <= base || f >= next {
			firsts[i] = 0
		}
	}
	below := make([]uint64, len(firsts)) // the lowest hint after i (next when none)
	low := next
	for i := len(firsts) - 1; i >= 0; i-- {
		below[i] = low
		if firsts[i] != 0 {
			low = min(low, firsts[i])
		}
	}
	high := base // the highest hint before i
	for i, f := range firsts {
		if f == 0 {
			continue
		}
		if f <= high || f >= below[i] {
			firsts[i] = 0
		}
		high = max(high, f)
	}
}
