package coldload

import (
	"fmt"

	"github.com/bucketlog/bucketlog/localseg"
)

// The restore target directory: what counts as empty (its removal is
// localseg.RemoveTree).

// adoptUnstarted makes a target that holds nothing but a store's LOCK file
// count as empty. A writable store takes its lock before it creates its
// first segment, so a crash or a full disk in between leaves exactly that
// file, and without this the shard could never be hydrated again. The lock
// is taken first: if a live writer holds it, it is that writer's store
// being born and the restore is refused (ErrLocked); otherwise nobody can
// be using it, and it is removed while held. Anything else in the target
// keeps the refusal notEmpty.
func adoptUnstarted(fsys localseg.FS, dir string, notEmpty error) (existed bool, err error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return true, fmt.Errorf("coldload: read %s: %w", dir, err)
	}
	if len(names) != 1 || !localseg.IsLockFile(names[0]) {
		return true, notEmpty
	}
	path := localseg.LockPath(dir)
	l, err := fsys.Lock(path)
	if err != nil {
		return true, fmt.Errorf("coldload: %s holds a store being created by a live writer: %w", dir, err)
	}
	defer l.Close()
	if err := fsys.Remove(path); err != nil {
		return true, fmt.Errorf("coldload: remove the lock of an unstarted store in %s: %w", dir, err)
	}
	return true, nil
}
