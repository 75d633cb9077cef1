package localseg_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/bucketlog/bucketlog/localseg"
)

// hookFS is this package's own small FS wrapper (independent of
// localseg/faultfs): it logs the write-class operations, counts syncs of
// segment files, and fails an operation when fail says so.
type hookFS struct {
	localseg.FS
	mu   sync.Mutex
	log  []string // "op base-name"
	fail func(op, name string) error
	// segSyncs counts Sync/Datasync calls on segment files.
	segSyncs int
}

func newHookFS() *hookFS { return &hookFS{FS: localseg.OSFS{}} }

func (h *hookFS) note(op, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	base := filepath.Base(name)
	if (op == "sync" || op == "datasync") && strings.HasPrefix(base, "seg-") {
		h.segSyncs++
	}
	if h.fail != nil {
		if err := h.fail(op, base); err != nil {
			return &os.PathError{Op: op, Path: name, Err: err}
		}
	}
	h.log = append(h.log, op+" "+base)
	return nil
}

func (h *hookFS) setFail(f func(op, name string) error) {
	h.mu.Lock()
	h.fail = f
	h.mu.Unlock()
}

func (h *hookFS) takeLog() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.log
	h.log = nil
	return l
}

func (h *hookFS) syncs() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.segSyncs
}

func (h *hookFS) OpenFile(name string, flag int, perm os.FileMode) (localseg.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := h.note("create", name); err != nil {
			return nil, err
		}
	}
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, h: h, name: name}, nil
}

func (h *hookFS) Remove(name string) error {
	if err := h.note("remove", name); err != nil {
		return err
	}
	return h.FS.Remove(name)
}

func (h *hookFS) Rename(oldname, newname string) error {
	if err := h.note("rename", newname); err != nil {
		return err
	}
	return h.FS.Rename(oldname, newname)
}

func (h *hookFS) SyncDir(dir string) error {
	if err := h.note("syncdir", dir); err != nil {
		return err
	}
	return h.FS.SyncDir(dir)
}

func (h *hookFS) Lock(name string) (io.Closer, error) { return h.FS.Lock(name) }

type hookFile struct {
	localseg.File
	h    *hookFS
	name string
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.h.note("write", f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *hookFile) Sync() error {
	if err := f.h.note("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *hookFile) Datasync() error {
	if err := f.h.note("datasync", f.name); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f *hookFile) Truncate(size int64) error {
	if err := f.h.note("truncate", f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// failNth fails the n-th (0-based) operation op on files whose base name
// starts with prefix, with err.
func failNth(op, prefix string, n int, err error) func(string, string) error {
	seen := 0
	return func(o, name string) error {
		if o != op || !strings.HasPrefix(name, prefix) {
			return nil
		}
		seen++
		if seen-1 == n {
			return err
		}
		return nil
	}
}

var _ = fmt.Sprint
