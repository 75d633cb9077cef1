package blobtier_test

import (
	"context"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestShards: the shards a bucket holds objects of, in order, whatever the
// kind; an observed bucket works too.
func TestShards(t *testing.T) {
	ctx := context.Background()
	b, err := blobtier.Open(ctx, "mem://", blobtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := blobtier.Shards(ctx, b); err != nil || len(got) != 0 {
		t.Fatalf("an empty bucket: %v %v", got, err)
	}
	for _, key := range []string{blobtier.SegmentKey(7, 1), blobtier.TailKey(2, 1, 3), blobtier.CursorKey(11), blobtier.WatermarkKey(7)} {
		if err := b.Put(ctx, key, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, bk := range []blobtier.Bucket{b, blobtier.Observe(b, func(blobtier.Op, blobtier.Result, int64, int64) {})} {
		got, err := blobtier.Shards(ctx, bk)
		if err != nil || !slices.Equal(got, []uint32{2, 7, 11}) {
			t.Fatalf("Shards = %v, %v; want [2 7 11]", got, err)
		}
	}
}
