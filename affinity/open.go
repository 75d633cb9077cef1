package affinity

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/localseg"
)

// OpenStore opens the owned shard's store in dir, writable, with opts: the
// store records the pair it is written with and refuses another (localseg
// shard.json), a configuration error (ErrConfig) that changes nothing.
func (o Ownership) OpenStore(dir string, opts localseg.Options) (*localseg.Store, error) {
	opts.Shard = localseg.ShardPair{Index: o.Index, Count: o.Count}
	st, err := localseg.Open(dir, opts)
	if errors.Is(err, localseg.ErrShardMismatch) {
		return nil, fmt.Errorf("open owned %s: %w: %w", o, ErrConfig, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open owned %s: %w", o, err)
	}
	return st, nil
}

// ColdOpener opens a read-only view of a shard this replica does not own,
// bounded by ctx (a cold load from the bucket may take long).
type ColdOpener func(ctx context.Context, shard int) (Reader, error)

// Read serves one read of shard from a view opened and closed for it.
func (o ColdOpener) Read(ctx context.Context, shard int, op func(Reader) (localseg.Page, error)) (localseg.Page, error) {
	r, err := o(ctx, shard)
	if err != nil {
		return localseg.Page{}, err
	}
	p, err := op(r)
	if cerr := r.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close cold load of shard %d: %w", shard, cerr)
	}
	return p, err
}
