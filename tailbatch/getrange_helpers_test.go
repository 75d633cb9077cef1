package tailbatch_test

import "context"

func (b *testBucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := b.enter(opGet, key); err != nil {
		return nil, err
	}
	data, err := b.inner.GetRange(ctx, key, off, n)
	return data, b.leave(opGet, key, err)
}
