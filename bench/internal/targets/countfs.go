package targets

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// IOCounts is what a countingFS saw: the barriers and bytes an operation of
// the store cost, so a row can say why an open took the time it did.
type IOCounts struct {
	FileSyncs, DirSyncs   atomic.Int64
	ReadBytes, WriteBytes atomic.Int64
	// Time spent inside the calls (wall clock, summed over goroutines),
	// and writes of 1 MiB or more (the preallocation of a new segment)
	// counted apart.
	SyncNanos, DirSyncNanos, WriteNanos atomic.Int64
	BigWrites, BigWriteNanos            atomic.Int64
	// PreallocSyncs are the fsyncs of a file right after big writes: the
	// barrier that makes a new segment's preallocation durable.
	PreallocSyncs, PreallocSyncNanos atomic.Int64
	Truncates                        atomic.Int64
}

// Breakdown says where the time of a run of length wall went, for a single
// writer (with several, the sums overlap and exceed wall).
func (c *IOCounts) Breakdown(wall time.Duration) string {
	pct := func(ns int64) float64 { return 100 * float64(ns) / float64(wall) }
	return fmt.Sprintf("file fsyncs %d (%.0f%% of wall), of which %d right after >=1MiB writes (%.0f%%); dir fsyncs %d (%.0f%%); writes %s (%.0f%%), of which %d of >=1MiB (%.0f%%); truncates %d",
		c.FileSyncs.Load(), pct(c.SyncNanos.Load()), c.PreallocSyncs.Load(), pct(c.PreallocSyncNanos.Load()),
		c.DirSyncs.Load(), pct(c.DirSyncNanos.Load()),
		byteLabel(c.WriteBytes.Load()), pct(c.WriteNanos.Load()), c.BigWrites.Load(), pct(c.BigWriteNanos.Load()), c.Truncates.Load())
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
	return &countingFile{File: f, c: fs.c}, nil
}

func (fs countingFS) SyncDir(dir string) error {
	t0 := time.Now()
	err := fs.FS.SyncDir(dir)
	fs.c.DirSyncNanos.Add(int64(time.Since(t0)))
	fs.c.DirSyncs.Add(1)
	return err
}

type countingFile struct {
	localseg.File
	c *IOCounts
	// bigDirty is set by a write of 1 MiB or more and cleared by the next
	// sync, which is then counted as a preallocation sync.
	bigDirty atomic.Bool
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.ReadBytes.Add(int64(n))
	return n, err
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	t0 := time.Now()
	n, err := f.File.WriteAt(p, off)
	d := int64(time.Since(t0))
	f.c.WriteNanos.Add(d)
	f.c.WriteBytes.Add(int64(n))
	if len(p) >= 1<<20 {
		f.bigDirty.Store(true)
		f.c.BigWrites.Add(1)
		f.c.BigWriteNanos.Add(d)
	}
	return n, err
}

func (f *countingFile) Sync() error { return f.sync(f.File.Sync) }

func (f *countingFile) Datasync() error { return f.sync(f.File.Datasync) }

func (f *countingFile) sync(fn func() error) error {
	t0 := time.Now()
	err := fn()
	d := int64(time.Since(t0))
	f.c.SyncNanos.Add(d)
	f.c.FileSyncs.Add(1)
	if f.bigDirty.Swap(false) {
		f.c.PreallocSyncs.Add(1)
		f.c.PreallocSyncNanos.Add(d)
	}
	return err
}

func (f *countingFile) Truncate(size int64) error {
	f.c.Truncates.Add(1)
	return f.File.Truncate(size)
}
