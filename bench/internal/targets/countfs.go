package targets

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/bucketlog/bucketlog/localseg"
)

// IOCounts is what a countingFS saw: the barriers and bytes an operation of
// the store cost, so a row can say why an open took the time it did.
type IOCounts struct {
	FileSyncs, DirSyncs   atomic.Int64
	ReadBytes, WriteBytes atomic.Int64
}

func (c *IOCounts) String() string {
	return fmt.Sprintf("file fsyncs=%d dir fsyncs=%d read=%s written=%s",
		c.FileSyncs.Load(), c.DirSyncs.Load(), byteLabel(c.ReadBytes.Load()), byteLabel(c.WriteBytes.Load()))
}

func byteLabel(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// countingFS passes every call to localseg.OSFS and counts syncs and bytes.
// It adds an atomic add per call, nothing next to the I/O it counts.
type countingFS struct {
	localseg.FS
	c *IOCounts
}

func newCountingFS(c *IOCounts) localseg.FS { return countingFS{FS: localseg.OSFS{}, c: c} }

func (fs countingFS) OpenFile(name string, flag int, perm os.FileMode) (localseg.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, c: fs.c}, nil
}

func (fs countingFS) SyncDir(dir string) error {
	fs.c.DirSyncs.Add(1)
	return fs.FS.SyncDir(dir)
}

type countingFile struct {
	localseg.File
	c *IOCounts
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.ReadBytes.Add(int64(n))
	return n, err
}

func (f countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.c.WriteBytes.Add(int64(n))
	return n, err
}

func (f countingFile) Sync() error {
	f.c.FileSyncs.Add(1)
	return f.File.Sync()
}

func (f countingFile) Datasync() error {
	f.c.FileSyncs.Add(1)
	return f.File.Datasync()
}
