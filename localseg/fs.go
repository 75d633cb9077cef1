package localseg

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// FS is the filesystem seam of the store. Every byte the store reads or
// writes, and every durability barrier it relies on, goes through it, so a
// test can substitute a fault-injecting or crash-simulating implementation
// (see localseg/faultfs). The production implementation is OSFS.
//
// Implementations must be safe for concurrent use.
type FS interface {
	// OpenFile opens name with os.OpenFile semantics.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file. A missing file is reported as fs.ErrNotExist.
	Remove(name string) error
	// Rename atomically replaces newname with oldname. It is durable only
	// after SyncDir of the parent directory.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
	// Lock takes an exclusive, non-blocking advisory lock on name (created
	// if missing). It fails at once with ErrLocked when another holder has
	// it. Closing the returned Closer releases it.
	Lock(name string) (io.Closer, error)
}

// File is an open file of an FS. The store only uses positional I/O.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync flushes data and metadata (fsync).
	Sync() error
	// Datasync flushes data and the metadata needed to read it back
	// (fdatasync). Appends use it.
	Datasync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Allocate reserves [off, off+n) without changing the file's contents
	// (fallocate with FALLOC_FL_KEEP_SIZE unset: the size grows and the new
	// range reads as zeros). It returns errors.ErrUnsupported when the
	// filesystem cannot.
	Allocate(off, n int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

// OSFS is the FS of the operating system.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Remove(name string) error                    { return os.Remove(name) }
func (OSFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (OSFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (OSFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (OSFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by another writer", ErrLocked, filepath.Dir(name))
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}

type osFile struct{ *os.File }

func (f osFile) Datasync() error { return unix.Fdatasync(int(f.Fd())) }

func (f osFile) Allocate(off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
			return errors.ErrUnsupported
		default:
			return err
		}
	}
}
