package blobtier

import (
	"context"
	"fmt"
	"io"
	"slices"

	"gocloud.dev/blob"
)

// Shards lists, in order, the shards that have at least one object in the
// bucket (a segment, a tail object, a watermark or a cursor object). A
// bucket does not record its shard count: this is what it holds. It walks
// one flat listing of the whole key space (a page request per 1000 keys),
// so it costs as much as listing every object once; keys that do not parse
// are skipped. b must be a Bucket of New or Open (or one Observe wraps).
func Shards(ctx context.Context, b Bucket) ([]uint32, error) {
	for {
		o, ok := b.(*observed)
		if !ok {
			break
		}
		b = o.b
	}
	t, ok := b.(*bucket)
	if !ok {
		return nil, fmt.Errorf("blobtier: Shards needs a bucket of New or Open, not %T", b)
	}
	if err := t.usable(ctx, OpList, keyRoot); err != nil {
		return nil, err
	}
	seen := map[uint32]bool{}
	it := t.b.List(&blob.ListOptions{Prefix: keyRoot})
	for {
		pctx, cancel := context.WithTimeout(ctx, t.timeout)
		obj, err := it.Next(pctx)
		cancel()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &ObjectError{OpList, keyRoot, err}
		}
		if obj.IsDir {
			continue
		}
		if k, err := ParseKey(obj.Key); err == nil {
			seen[k.Shard] = true
		}
	}
	out := make([]uint32, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}
