package buckets

import (
	"context"

	"github.com/bucketlog/bucketlog/blobtier"
)

// GetRange counts a ranged read as a get, as blobtier.Observe does.
func (t *kindTap) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	data, err := t.b.GetRange(ctx, key, off, n)
	t.noteKey(blobtier.OpGet, key, 0, err)
	return data, err
}
