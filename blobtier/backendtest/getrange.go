package backendtest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// testGetRange: GetRange returns exactly the bytes asked, fewer only where
// the object ends, a missing key is ErrNotFound, and a bad range is
// refused before any request.
func testGetRange(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	data := body(13, 5000)
	key := blobtier.SegmentKey(13, 1)
	if err := b.PutIfAbsent(ctx, key, data, 1); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 12}, {0, 4096}, {100, 1000}, {4990, 100}, {0, 5000}, {0, 6000}} {
		got, err := b.GetRange(ctx, key, r[0], r[1])
		want := data[r[0]:min(r[0]+r[1], int64(len(data)))]
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("GetRange(%d, %d): %d bytes, %v; want %d bytes", r[0], r[1], len(got), err, len(want))
		}
	}
	_, err := b.GetRange(ctx, blobtier.SegmentKey(13, 2), 0, 100)
	wantErr(t, "GetRange of a missing key", err, blobtier.ErrNotFound, blobtier.SegmentKey(13, 2))
	if _, err := b.GetRange(ctx, key, 0, 0); !errors.Is(err, blobtier.ErrBadRange) {
		t.Fatalf("GetRange of 0 bytes: %v, want ErrBadRange", err)
	}
}
