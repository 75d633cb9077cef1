package coldload

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/localseg"
)

// What the root package's Open, Restore and non-owner reads ask of a cold
// load, each in one call: the hydrate of an empty disk at open, a restore
// into an empty directory with its refusals classified, and a read-only
// view of another shard that removes itself on Close.

// IsEmptyStore reports whether dir holds no store yet: no segment file, no
// reclaim manifest, no checkpoint and no segment index file. A store that
// lost its segment files still holds its checkpoint (written once the first
// segment is durable): it is opened, and refused by the store as a lost
// state (issue 12, finding 9), not taken for an empty directory.
func IsEmptyStore(dir string) (bool, error) {
	is, err := localseg.IsStore(dir)
	return !is && err == nil, err
}

// HydrateEmpty hydrates dir from the bucket when it holds no store yet (the
// first open of a shard on a fresh disk); hydrated is false, and nothing is
// done, when dir already holds one.
func HydrateEmpty(ctx context.Context, b Reader, shard uint32, dir string, opts Options) (rep Report, hydrated bool, err error) {
	empty, err := IsEmptyStore(dir)
	if err != nil || !empty {
		return Report{}, false, err
	}
	rep, err = Hydrate(ctx, b, shard, dir, opts)
	return rep, err == nil, err
}

// Restore rebuilds shard into dir, which must hold no store, from the
// bucket alone. Its refusals are classified: a target that holds a store,
// a gap, a short restore, an empty bucket and a watermark the objects do
// not support are localseg.ErrInvalidState; a corrupt object or a conflict
// is left as it is (a storage error naming the key).
func Restore(ctx context.Context, b Reader, shard uint32, dir string, opts Options) (Report, error) {
	if empty, err := IsEmptyStore(dir); err != nil {
		return Report{}, err
	} else if !empty {
		return Report{}, fmt.Errorf("%w: %s already holds a store; restore only into an empty directory", localseg.ErrInvalidState, dir)
	}
	rep, err := Hydrate(ctx, b, shard, dir, opts)
	switch {
	case errors.Is(err, ErrGap), errors.Is(err, ErrShort), errors.Is(err, ErrEmpty),
		errors.Is(err, ErrNotEmpty), errors.Is(err, ErrWatermarkAhead):
		return rep, fmt.Errorf("%w: %w", localseg.ErrInvalidState, err)
	}
	return rep, err
}

// Cold is a read-only view of a shard loaded from the bucket into a
// scratch directory of its own; Close removes it.
type Cold struct {
	*localseg.Store
	cleanup func()
}

// OpenCold loads shard read-only from the bucket (ReadOnly) for one read of
// a shard this process does not own.
func OpenCold(ctx context.Context, b Reader, shard uint32) (*Cold, error) {
	st, cleanup, err := ReadOnly(ctx, b, shard, "")
	if err != nil {
		return nil, fmt.Errorf("cold load shard %d from the bucket: %w", shard, err)
	}
	return &Cold{Store: st, cleanup: cleanup}, nil
}

// Close removes the scratch directory (the cleanup closes the store).
func (c *Cold) Close() error { c.cleanup(); return nil }
