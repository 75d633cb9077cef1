package affinity

import (
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
