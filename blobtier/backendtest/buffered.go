package backendtest

import (
	"bytes"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// testVerifiedGetBuffered: GetBuffered makes every check Get makes, also
// into a buffer that holds the intact object from a read a moment before
// (a short object must not be completed by the stale bytes after it), and
// an intact object lands in the buffer handed (too small a buffer: in a
// new one).
func testVerifiedGetBuffered(t *testing.T, b blobtier.Bucket, caps Caps) {
	ctx := ctxFor(t)
	data := body(12, 3000)
	stale := func() []byte {
		buf := make([]byte, len(data)+100)
		copy(buf, data)
		return buf[:0]
	}
	all := corruptions(data)
	for i, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range all {
			if !yield(n) {
				return
			}
		}
	}) {
		c := all[name]
		key := blobtier.SegmentKey(12, uint64(i+1))
		caps.PutRaw(t, b, key, c.data, c.meta)
		_, _, err := blobtier.GetBuffered(ctx, b, key, stale())
		wantErr(t, "GetBuffered of "+name, err, blobtier.ErrCorrupt, key)
	}
	// The controls: intact objects read back, into the buffer when it fits.
	key := blobtier.SegmentKey(12, 999)
	caps.PutRaw(t, b, key, data, blobtier.MetaOf(data, 0).Encode())
	buf := stale()
	got, _, err := blobtier.GetBuffered(ctx, b, key, buf)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetBuffered of an intact object: %d bytes, %v", len(got), err)
	}
	if _, ok := b.(blobtier.BufferedGetter); ok && &got[0] != &buf[:1][0] {
		t.Fatal("GetBuffered did not read into the buffer it was handed, which holds the object")
	}
	// A buffer of exactly the object's length is a byte short: the read
	// takes one byte more, to see an object longer than its metadata.
	for _, n := range []int{10, len(data)} {
		got, _, err = blobtier.GetBuffered(ctx, b, key, make([]byte, 0, n))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("GetBuffered into a buffer of %d bytes: %d bytes, %v", n, len(got), err)
		}
	}
	short := blobtier.SegmentKey(12, 1000)
	caps.PutRaw(t, b, short, data[:100], blobtier.MetaOf(data[:100], 0).Encode())
	got, _, err = blobtier.GetBuffered(ctx, b, short, stale())
	if err != nil || !bytes.Equal(got, data[:100]) {
		t.Fatalf("GetBuffered of a 100-byte object into a buffer holding more: %d bytes, %v", len(got), err)
	}
}
