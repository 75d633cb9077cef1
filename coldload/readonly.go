package coldload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/bucketlog/bucketlog/localseg"
)

// ReadOnly serves a non-owner read from the bucket: it hydrates shard into
// a fresh scratch directory and opens the result read-only. Nothing is ever
// written to the bucket (Reader has no write method). A shard with nothing
// in the bucket is an empty store, not an error; a hole, a corrupt object or
// a conflict is an error (a non-owner read must not serve a silently
// shortened history).
//
// scratch is the directory under which the scratch directory is made
// (os.TempDir() when empty); ReadOnly never removes scratch itself. The
// returned cleanup closes the store and removes the scratch directory; it
// may be called more than once.
func ReadOnly(ctx context.Context, b Reader, shard uint32, scratch string) (*localseg.Store, func(), error) {
	st, _, cleanup, err := ReadOnlyWith(ctx, b, shard, scratch, Options{})
	return st, cleanup, err
}

// ReadOnlyWith is ReadOnly with options and the hydrate's report.
// opts.AllowEmpty is always set; AllowPartial is honoured (a caller that
// would rather read a prefix than fail may ask for it).
func ReadOnlyWith(ctx context.Context, b Reader, shard uint32, scratch string, opts Options) (*localseg.Store, Report, func(), error) {
	opts.AllowEmpty = true
	opts = opts.withDefaults()
	fsys := opts.Store.FS
	if scratch == "" {
		scratch = os.TempDir()
	}
	// A directory of our own under scratch, so concurrent cold loads of one
	// shard sharing a scratch root never meet.
	root := filepath.Join(scratch, fmt.Sprintf("bucketlog-coldload-%04d-%016x", shard, rand.Uint64()))
	if err := fsys.MkdirAll(root, 0o755); err != nil {
		return nil, Report{}, func() {}, fmt.Errorf("coldload: create scratch %s: %w", root, err)
	}
	removeRoot := func() {
		if err := localseg.RemoveTree(fsys, root); err != nil {
			opts.Logger.Warn("coldload: cannot remove the scratch directory", "dir", root, "err", err)
		}
	}
	dir := localseg.ShardDir(root, int(shard))
	rep, err := Hydrate(ctx, b, shard, dir, opts)
	if err != nil {
		removeRoot()
		return nil, rep, func() {}, err
	}
	sopts := opts.Store
	sopts.ReadOnly = true
	st, err := localseg.Open(dir, sopts)
	if err != nil {
		removeRoot()
		return nil, rep, func() {}, fmt.Errorf("coldload: open the cold-loaded store read-only: %w", err)
	}
	var once sync.Once
	cleanup := func() {
		once.Do(func() {
			if err := st.Close(); err != nil {
				opts.Logger.Warn("coldload: close the cold-loaded store", "dir", dir, "err", err)
			}
			removeRoot()
		})
	}
	return st, rep, cleanup, nil
}
