package coldload

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/bucketlog/bucketlog/localseg"
)

// deferSyncFS is the filesystem of the side store (see hydrateInto). The
// side store's own barriers protect nothing: it lives in a scratch
// directory that a crash throws away, and only its segment files survive,
// moved into the restore's directory, which is synced once at the end. So
// every Sync, Datasync and SyncDir it asks for is skipped, and each segment
// file is fsynced exactly once instead, when the store closes it (through
// the same file descriptor, so no write-back error can fall between). The
// first fsync error is kept and fails the restore.
type deferSyncFS struct {
	localseg.FS
	mu     sync.Mutex
	err    error
	synced map[string]bool // segment files fsynced at close, by path
}

func (d *deferSyncFS) OpenFile(name string, flag int, perm os.FileMode) (localseg.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(name)
	segment := localseg.IsSegmentFile(base)
	return &deferSyncFile{File: f, fs: d, name: filepath.Clean(name), segment: segment && flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

func (d *deferSyncFS) SyncDir(string) error { return nil }

// Err returns the first fsync error of a segment file.
func (d *deferSyncFS) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *deferSyncFS) note(err error) {
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
}

type deferSyncFile struct {
	localseg.File
	fs      *deferSyncFS
	name    string
	segment bool
}

func (f *deferSyncFile) Sync() error     { return nil }
func (f *deferSyncFile) Datasync() error { return nil }

func (f *deferSyncFile) Close() error {
	if f.segment {
		if err := f.File.Sync(); err != nil {
			f.fs.note(err)
		} else {
			f.fs.mu.Lock()
			if f.fs.synced == nil {
				f.fs.synced = map[string]bool{}
			}
			f.fs.synced[f.name] = true
			f.fs.mu.Unlock()
		}
	}
	return f.File.Close()
}

// wasSynced reports whether the segment file at path was fsynced when it
// was last closed.
func (d *deferSyncFS) wasSynced(path string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.synced[path]
}
