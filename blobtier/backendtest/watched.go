package backendtest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// recorder is a blobtier.Watcher that checks the calls it gets: a Reset
// before any Advance, and each Advance's bytes those of the one before,
// unchanged, and more.
type recorder struct {
	resets, advances int
	last             []byte // a copy of the last Advance's bytes
	err              error
}

func (r *recorder) Reset() { r.resets++; r.last = nil }

func (r *recorder) Advance(soFar []byte) {
	r.advances++
	switch {
	case r.err != nil:
	case r.resets == 0:
		r.err = fmt.Errorf("Advance before any Reset")
	case len(soFar) <= len(r.last) || !bytes.Equal(soFar[:len(r.last)], r.last):
		r.err = fmt.Errorf("Advance of %d bytes does not extend the %d before", len(soFar), len(r.last))
	}
	r.last = bytes.Clone(soFar)
}

// testVerifiedGetWatched: GetWatched makes every check Get makes, and its
// Watcher sees the bytes growing, the last time exactly those returned;
// where the bucket streams (a WatchedGetter), an object of several chunks
// is seen in more than one piece.
func testVerifiedGetWatched(t *testing.T, b blobtier.Bucket, caps Caps) {
	ctx := ctxFor(t)
	data := body(13, 3000)
	all := corruptions(data)
	for i, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range all {
			if !yield(n) {
				return
			}
		}
	}) {
		c := all[name]
		key := blobtier.SegmentKey(13, uint64(i+1))
		caps.PutRaw(t, b, key, c.data, c.meta)
		var w recorder
		_, _, err := blobtier.GetWatched(ctx, b, key, nil, &w)
		wantErr(t, "GetWatched of "+name, err, blobtier.ErrCorrupt, key)
		if w.err != nil {
			t.Fatalf("GetWatched of %s: %v", name, w.err)
		}
	}
	big := body(14, 600<<10+17) // more than two chunks of the digest
	for i, d := range [][]byte{data, big, {}} {
		key := blobtier.SegmentKey(13, uint64(900+i))
		caps.PutRaw(t, b, key, d, blobtier.MetaOf(d, 0).Encode())
		var w recorder
		got, _, err := blobtier.GetWatched(ctx, b, key, make([]byte, 0, len(d)+1), &w)
		if err != nil || !bytes.Equal(got, d) {
			t.Fatalf("GetWatched of an intact object of %d bytes: %d bytes, %v", len(d), len(got), err)
		}
		if w.err != nil || w.resets == 0 || !bytes.Equal(w.last, d) {
			t.Fatalf("GetWatched of %d bytes: the watcher saw %d resets, %d bytes last, %v", len(d), w.resets, len(w.last), w.err)
		}
		if _, ok := b.(blobtier.WatchedGetter); ok && len(d) == len(big) && w.advances < 2 {
			t.Fatalf("an object of %d bytes was shown in %d pieces: not as it arrived", len(d), w.advances)
		}
	}
}
