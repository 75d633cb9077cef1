package faultfs

import (
	"errors"
	"io"
	"os"

	"github.com/bucketlog/bucketlog/localseg"
)

// Wrap returns fs with inj consulted before every operation. See the package
// documentation for what a failed operation does.
func Wrap(fs localseg.FS, inj Injector) localseg.FS {
	return &faultFS{fs: fs, inj: inj}
}

type faultFS struct {
	fs  localseg.FS
	inj Injector
}

// syncFailer is implemented by files that model what a failed fsync does to
// the page cache (MemFS files, and faultFS files over them).
type syncFailer interface{ failSync() }

// check asks the injector about op and wraps its error as a system call
// would report it.
func (w *faultFS) check(op Op, verb string) error {
	if err := w.inj.MaybeError(op); err != nil {
		if op.Kind == OpRename {
			return &os.LinkError{Op: verb, Old: op.Path, New: op.NewPath, Err: err}
		}
		return &os.PathError{Op: verb, Path: op.Path, Err: err}
	}
	return nil
}

func crashed(err error) bool { return errors.Is(err, ErrCrashed) }

func (w *faultFS) OpenFile(name string, flag int, perm os.FileMode) (localseg.File, error) {
	kind := OpOpen
	if flag&os.O_CREATE != 0 {
		kind = OpCreate
	}
	if err := w.check(Op{Kind: kind, Path: name}, "open"); err != nil {
		return nil, err
	}
	f, err := w.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{w: w, f: f, name: name}, nil
}

func (w *faultFS) Remove(name string) error {
	if err := w.check(Op{Kind: OpRemove, Path: name}, "remove"); err != nil {
		return err
	}
	return w.fs.Remove(name)
}

func (w *faultFS) Rename(oldname, newname string) error {
	if err := w.check(Op{Kind: OpRename, Path: oldname, NewPath: newname}, "rename"); err != nil {
		return err
	}
	return w.fs.Rename(oldname, newname)
}

func (w *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := w.check(Op{Kind: OpMkdir, Path: dir}, "mkdir"); err != nil {
		return err
	}
	return w.fs.MkdirAll(dir, perm)
}

func (w *faultFS) ReadDir(dir string) ([]string, error) {
	if err := w.check(Op{Kind: OpReadDir, Path: dir}, "readdir"); err != nil {
		return nil, err
	}
	return w.fs.ReadDir(dir)
}

func (w *faultFS) Stat(name string) (os.FileInfo, error) {
	if err := w.check(Op{Kind: OpStat, Path: name}, "stat"); err != nil {
		return nil, err
	}
	return w.fs.Stat(name)
}

func (w *faultFS) SyncDir(dir string) error {
	if err := w.check(Op{Kind: OpSyncDir, Path: dir}, "sync"); err != nil {
		return err
	}
	return w.fs.SyncDir(dir)
}

func (w *faultFS) Lock(name string) (io.Closer, error) {
	if err := w.check(Op{Kind: OpLock, Path: name}, "lock"); err != nil {
		return nil, err
	}
	return w.fs.Lock(name)
}

type faultFile struct {
	w    *faultFS
	f    localseg.File
	name string
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.w.check(Op{Kind: OpRead, Path: f.name, Offset: off, Len: int64(len(p))}, "read"); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

// WriteAt fails a write as a full disk does: the first half of p is written
// and the error returned. A crashed process writes nothing.
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	err := f.w.check(Op{Kind: OpWrite, Path: f.name, Offset: off, Len: int64(len(p))}, "write")
	if err == nil {
		return f.f.WriteAt(p, off)
	}
	if crashed(err) || len(p) < 2 {
		return 0, err
	}
	n, werr := f.f.WriteAt(p[:len(p)/2], off)
	if werr != nil {
		return n, werr
	}
	return n, err
}

func (f *faultFile) sync(datasync bool) error {
	if err := f.w.check(Op{Kind: OpSync, Path: f.name}, "sync"); err != nil {
		if sf, ok := f.f.(syncFailer); ok && !crashed(err) {
			sf.failSync()
		}
		return err
	}
	if datasync {
		return f.f.Datasync()
	}
	return f.f.Sync()
}

func (f *faultFile) Sync() error     { return f.sync(false) }
func (f *faultFile) Datasync() error { return f.sync(true) }

// failSync lets a wrapper over this wrapper fail a sync of the MemFS file
// underneath.
func (f *faultFile) failSync() {
	if sf, ok := f.f.(syncFailer); ok {
		sf.failSync()
	}
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.w.check(Op{Kind: OpTruncate, Path: f.name, Offset: size}, "truncate"); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *faultFile) Allocate(off, n int64) error {
	if err := f.w.check(Op{Kind: OpAllocate, Path: f.name, Offset: off, Len: n}, "allocate"); err != nil {
		return err
	}
	return f.f.Allocate(off, n)
}

func (f *faultFile) Stat() (os.FileInfo, error) {
	if err := f.w.check(Op{Kind: OpStat, Path: f.name}, "stat"); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

// Close is never failed: the store cannot do anything useful about a failed
// close, and a crashed process's files are closed by the kernel.
func (f *faultFile) Close() error { return f.f.Close() }
