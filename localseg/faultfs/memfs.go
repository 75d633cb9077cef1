package faultfs

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// SectorSize is the unit a crash tears at: a sector is written whole or not
// at all, but the sectors of one write persist independently.
const SectorSize = 512

// MemFS is an in-memory localseg.FS that keeps, for every file, what reads
// return and what would survive a power cut, and for every directory, which
// of its entries are durable. See the package documentation for the model.
// It is safe for concurrent use.
type MemFS struct {
	mu sync.Mutex
	// dirs holds the current entries of every directory, by clean path.
	dirs map[string]map[string]*node
	// base is the durable state of every directory when this MemFS was
	// made; log holds every directory operation since, in order; synced
	// holds, per directory, len(log) at its last SyncDir. The durable
	// entries of directory d are base replayed through log[:synced[d]].
	base   map[string]map[string]*node
	log    []metaOp
	synced map[string]int
	locks  map[string]bool
	root   *node
	nextID uint64
	// mutations counts operations that changed the current or the durable
	// state.
	mutations uint64
}

var _ localseg.FS = (*MemFS)(nil)

// node is a file or a directory. For a directory only isDir matters: its
// entries live in MemFS.dirs under its path.
type node struct {
	id    uint64
	isDir bool
	// data is the current contents (the page cache); dur is what a crash
	// keeps. dirty holds the sectors written since the last sync; a
	// successful sync copies them from data to dur, a failed one forgets
	// them.
	data  []byte
	dur   []byte
	dirty map[int64]struct{}
	mtime time.Time
	mode  os.FileMode
}

// effect links n as dir/name, or unlinks dir/name when n is nil.
type effect struct {
	dir, name string
	n         *node
}

// metaOp is one directory operation; a rename has two effects and is atomic.
type metaOp struct{ effects []effect }

// NewMemFS returns an empty filesystem holding only the root directory "/".
// Relative names are taken relative to "/".
func NewMemFS() *MemFS {
	m := &MemFS{
		dirs:   map[string]map[string]*node{"/": {}},
		base:   map[string]map[string]*node{"/": {}},
		synced: map[string]int{},
		locks:  map[string]bool{},
	}
	m.root = &node{id: m.newIDLocked(), isDir: true, mode: os.ModeDir | 0o755}
	return m
}

func (m *MemFS) newIDLocked() uint64 {
	m.nextID++
	return m.nextID
}

func clean(name string) string { return path.Clean("/" + name) }

func pathErr(op, p string, err error) error { return &os.PathError{Op: op, Path: p, Err: err} }

// lookupLocked returns the node at clean path p, or nil.
func (m *MemFS) lookupLocked(p string) *node {
	if p == "/" {
		return m.root
	}
	entries := m.dirs[path.Dir(p)]
	if entries == nil {
		return nil
	}
	return entries[path.Base(p)]
}

// parentLocked returns the entries of the parent of p, or the error a system
// call would give when the parent is missing or not a directory.
func (m *MemFS) parentLocked(op, p string) (map[string]*node, error) {
	dir := path.Dir(p)
	if entries := m.dirs[dir]; entries != nil {
		return entries, nil
	}
	if n := m.lookupLocked(dir); n != nil && !n.isDir {
		return nil, pathErr(op, p, syscall.ENOTDIR)
	}
	return nil, pathErr(op, p, syscall.ENOENT)
}

func applyEffect(dirs map[string]map[string]*node, e effect) {
	entries := dirs[e.dir]
	if entries == nil {
		entries = map[string]*node{}
		dirs[e.dir] = entries
	}
	if e.n == nil {
		delete(entries, e.name)
	} else {
		entries[e.name] = e.n
	}
}

// metaLocked applies a directory operation to the current state and logs it.
func (m *MemFS) metaLocked(effs ...effect) {
	for _, e := range effs {
		child := path.Join(e.dir, e.name)
		if old := m.dirs[e.dir][e.name]; old != nil && old.isDir && e.n == nil {
			delete(m.dirs, child)
		}
		applyEffect(m.dirs, e)
		if e.n != nil && e.n.isDir && m.dirs[child] == nil {
			m.dirs[child] = map[string]*node{}
		}
	}
	m.log = append(m.log, metaOp{effects: effs})
	m.mutations++
}

// OpenFile opens name with os.OpenFile semantics for the access mode and the
// flags O_CREATE, O_EXCL, O_TRUNC and O_APPEND.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (localseg.File, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	f := &memFile{
		fs:     m,
		name:   name,
		read:   acc == os.O_RDONLY || acc == os.O_RDWR,
		write:  acc == os.O_WRONLY || acc == os.O_RDWR,
		append: flag&os.O_APPEND != 0,
	}
	n := m.lookupLocked(p)
	switch {
	case n == nil:
		if _, err := m.parentLocked("open", p); err != nil {
			return nil, err
		}
		if flag&os.O_CREATE == 0 {
			return nil, pathErr("open", p, syscall.ENOENT)
		}
		n = &node{id: m.newIDLocked(), dirty: map[int64]struct{}{}, mtime: time.Now(), mode: perm.Perm()}
		m.metaLocked(effect{dir: path.Dir(p), name: path.Base(p), n: n})
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", p, syscall.EEXIST)
	case n.isDir && f.write:
		return nil, pathErr("open", p, syscall.EISDIR)
	}
	if flag&os.O_TRUNC != 0 && f.write && !n.isDir && len(n.data) > 0 {
		m.resizeLocked(n, 0)
	}
	f.n = n
	return f, nil
}

// markDirty records that the sectors covering [from, to) differ from what
// was last synced.
func markDirty(n *node, from, to int64) {
	for s := from / SectorSize; s*SectorSize < to; s++ {
		n.dirty[s] = struct{}{}
	}
}

// resizeLocked sets the current size, reading zeros in any new range.
func (m *MemFS) resizeLocked(n *node, size int64) {
	old := int64(len(n.data))
	switch {
	case size < old:
		// The dropped range must not resurface from the durable image
		// when the file grows again and is synced.
		markDirty(n, size, old)
		n.data = n.data[:size]
	case size > old:
		n.data = append(n.data, make([]byte, size-old)...)
		// Zeros need no sector writes beyond the durable size, but where
		// the durable image still holds older bytes they must be replaced.
		if durLen := int64(len(n.dur)); old < durLen {
			markDirty(n, old, min(size, durLen))
		}
	}
	n.mtime = time.Now()
	m.mutations++
}

// Remove deletes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == "/" {
		return pathErr("remove", p, syscall.EBUSY)
	}
	n := m.lookupLocked(p)
	if n == nil {
		return pathErr("remove", p, syscall.ENOENT)
	}
	if n.isDir && len(m.dirs[p]) > 0 {
		return pathErr("remove", p, syscall.ENOTEMPTY)
	}
	m.metaLocked(effect{dir: path.Dir(p), name: path.Base(p)})
	return nil
}

// Rename atomically replaces newname with oldname. Renaming directories is
// not modelled (the store never does it) and fails with EINVAL.
func (m *MemFS) Rename(oldname, newname string) error {
	po, pn := clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookupLocked(po)
	if n == nil {
		return &os.LinkError{Op: "rename", Old: po, New: pn, Err: syscall.ENOENT}
	}
	if n.isDir {
		return &os.LinkError{Op: "rename", Old: po, New: pn, Err: syscall.EINVAL}
	}
	if _, err := m.parentLocked("rename", pn); err != nil {
		return &os.LinkError{Op: "rename", Old: po, New: pn, Err: syscall.ENOENT}
	}
	if t := m.lookupLocked(pn); t != nil && t.isDir {
		return &os.LinkError{Op: "rename", Old: po, New: pn, Err: syscall.EISDIR}
	}
	if po == pn {
		return nil
	}
	m.metaLocked(
		effect{dir: path.Dir(po), name: path.Base(po)},
		effect{dir: path.Dir(pn), name: path.Base(pn), n: n},
	)
	return nil
}

// MkdirAll creates dir and its missing parents. Each new directory's entry
// is durable only after SyncDir of its parent.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := "/"
	for _, part := range splitParts(p) {
		next := path.Join(cur, part)
		n := m.lookupLocked(next)
		switch {
		case n == nil:
			m.metaLocked(effect{dir: cur, name: part, n: &node{id: m.newIDLocked(), isDir: true, mode: os.ModeDir | perm.Perm()}})
		case !n.isDir:
			return pathErr("mkdir", next, syscall.ENOTDIR)
		}
		cur = next
	}
	return nil
}

func splitParts(p string) []string {
	var parts []string
	for p != "/" {
		parts = append(parts, path.Base(p))
		p = path.Dir(p)
	}
	slices.Reverse(parts)
	return parts
}

// ReadDir lists the current entries of dir, sorted.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.dirs[p]
	if entries == nil {
		if n := m.lookupLocked(p); n != nil && !n.isDir {
			return nil, pathErr("readdir", p, syscall.ENOTDIR)
		}
		return nil, pathErr("readdir", p, syscall.ENOENT)
	}
	return slices.Sorted(maps.Keys(entries)), nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookupLocked(p)
	if n == nil {
		return nil, pathErr("stat", p, syscall.ENOENT)
	}
	return n.infoLocked(path.Base(p)), nil
}

// SyncDir makes the current entries of dir durable.
func (m *MemFS) SyncDir(dir string) error {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[p] == nil {
		return pathErr("sync", p, syscall.ENOENT)
	}
	if m.synced[p] != len(m.log) {
		m.synced[p] = len(m.log)
		m.mutations++
	}
	return nil
}

// Lock takes the exclusive lock on name, creating the file if it is
// missing (as flock on an O_CREATE open does).
func (m *MemFS) Lock(name string) (io.Closer, error) {
	p := clean(name)
	f, err := m.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[p] {
		f.(*memFile).closeLocked()
		return nil, fmt.Errorf("%w: %s is held by another writer", localseg.ErrLocked, path.Dir(p))
	}
	m.locks[p] = true
	return &memLock{f: f.(*memFile), p: p}, nil
}

type memLock struct {
	f    *memFile
	p    string
	once sync.Once
}

func (l *memLock) Close() error {
	err := os.ErrClosed
	l.once.Do(func() {
		m := l.f.fs
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.locks, l.p)
		err = l.f.closeLocked()
	})
	return err
}

// Mutations counts the operations that changed the filesystem: its current
// contents or entries, or what is durable.
func (m *MemFS) Mutations() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mutations
}

// Files returns the current contents of every file, keyed by clean path.
func (m *MemFS) Files() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for dir, entries := range m.dirs {
		for name, n := range entries {
			if !n.isDir {
				out[path.Join(dir, name)] = slices.Clone(n.data)
			}
		}
	}
	return out
}

// ReadFile returns the current contents of name.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookupLocked(p)
	switch {
	case n == nil:
		return nil, pathErr("open", p, syscall.ENOENT)
	case n.isDir:
		return nil, pathErr("read", p, syscall.EISDIR)
	}
	return slices.Clone(n.data), nil
}

// CrashOptions choose what a crash keeps beyond what is durable.
type CrashOptions struct {
	// Torn persists, as a power cut may, part of what was not synced: each
	// dirty sector independently, each unsynced size change or not, and a
	// prefix of the directory operations not yet made durable. Seed picks
	// the outcome deterministically.
	Torn bool
	Seed uint64
}

// CrashClone returns a new MemFS holding what a power cut now would leave:
// only what is durable, or with opts.Torn also part of what is not. The
// receiver is unchanged. The clone's contents are all durable, it has no
// locks and no open files.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rng *rand.Rand
	cut := 0
	keep := 0.0
	if opts.Torn {
		rng = rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
		// Mix outcomes that are common in practice (writeback finished,
		// the journal committed) with arbitrary interleavings.
		keep = [...]float64{0.5, 0.5, 0.9, 1}[rng.IntN(4)]
		if rng.IntN(2) == 0 {
			cut = len(m.log)
		} else {
			cut = rng.IntN(len(m.log) + 1)
		}
	}

	// Each directory keeps its entries as of max(its last SyncDir, cut).
	later := map[int][]string{}
	for d, q := range m.synced {
		if q > cut {
			later[q] = append(later[q], d)
		}
	}
	snaps := map[string]map[string]*node{}
	state := map[string]map[string]*node{}
	for d, e := range m.base {
		state[d] = maps.Clone(e)
	}
	take := func(i int) {
		if i == cut {
			for d, e := range state {
				if m.synced[d] <= cut {
					snaps[d] = maps.Clone(e)
				}
			}
		}
		for _, d := range later[i] {
			snaps[d] = maps.Clone(state[d])
		}
	}
	for i, op := range m.log {
		take(i)
		for _, e := range op.effects {
			applyEffect(state, e)
		}
	}
	take(len(m.log))

	c := NewMemFS()
	clones := map[*node]*node{}
	var walk func(dir string)
	walk = func(dir string) {
		entries := snaps[dir]
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			n := entries[name]
			child := path.Join(dir, name)
			if n.isDir {
				c.dirs[dir][name] = &node{id: c.newIDLocked(), isDir: true, mode: n.mode}
				c.dirs[child] = map[string]*node{}
				walk(child)
				continue
			}
			cn := clones[n]
			if cn == nil {
				cn = c.crashFile(n, rng, keep)
				clones[n] = cn
			}
			c.dirs[dir][name] = cn
		}
	}
	walk("/")
	for d, e := range c.dirs {
		c.base[d] = maps.Clone(e)
	}
	return c
}

// crashFile returns the image of n after a crash: its durable contents, or
// with rng also a random part of what was not synced.
func (c *MemFS) crashFile(n *node, rng *rand.Rand, keep float64) *node {
	size := len(n.dur)
	if rng != nil && len(n.data) != len(n.dur) && rng.Float64() < keep {
		size = len(n.data)
	}
	img := make([]byte, size)
	copy(img, n.dur)
	if rng != nil {
		for _, s := range slices.Sorted(maps.Keys(n.dirty)) {
			if rng.Float64() >= keep {
				continue
			}
			start := s * SectorSize
			end := min(start+SectorSize, int64(size), int64(len(n.data)))
			if start < end {
				copy(img[start:end], n.data[start:end])
			}
		}
	}
	return &node{
		id:    c.newIDLocked(),
		data:  img,
		dur:   slices.Clone(img),
		dirty: map[int64]struct{}{},
		mtime: n.mtime,
		mode:  n.mode,
	}
}

type memFileInfo struct {
	name  string
	size  int64
	mode  os.FileMode
	mtime time.Time
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) Mode() os.FileMode  { return fi.mode }
func (fi memFileInfo) ModTime() time.Time { return fi.mtime }
func (fi memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memFileInfo) Sys() any           { return nil }

func (n *node) infoLocked(name string) os.FileInfo {
	return memFileInfo{name: name, size: int64(len(n.data)), mode: n.mode, mtime: n.mtime}
}

// memFile is an open file of a MemFS. Its state is guarded by fs.mu.
type memFile struct {
	fs                  *MemFS
	n                   *node
	name                string
	read, write, append bool
	closed              bool
}

var _ localseg.File = (*memFile)(nil)

// checkLocked returns the error of an operation on a closed file, a
// directory, or a file not opened for writing (write) or reading.
func (f *memFile) checkLocked(op string, write bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, os.ErrClosed)
	case f.n.isDir:
		return pathErr(op, f.name, syscall.EISDIR)
	case write && !f.write, !write && !f.read:
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	if f.append {
		return 0, errors.New("os: invalid use of WriteAt on file opened with O_APPEND")
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	if len(p) == 0 {
		return 0, nil
	}
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		f.fs.resizeLocked(f.n, end)
	}
	copy(f.n.data[off:], p)
	markDirty(f.n, off, end)
	f.n.mtime = time.Now()
	f.fs.mutations++
	return len(p), nil
}

func (f *memFile) syncLocked() error {
	if f.closed {
		return pathErr("sync", f.name, os.ErrClosed)
	}
	n := f.n
	if n.isDir {
		return nil
	}
	if len(n.dirty) == 0 && len(n.dur) == len(n.data) {
		return nil
	}
	if size := len(n.data); size < len(n.dur) {
		n.dur = n.dur[:size]
	} else if size > len(n.dur) {
		n.dur = append(n.dur, make([]byte, size-len(n.dur))...)
	}
	for s := range n.dirty {
		start := s * SectorSize
		end := min(start+SectorSize, int64(len(n.data)))
		if start < end {
			copy(n.dur[start:end], n.data[start:end])
		}
	}
	clear(n.dirty)
	f.fs.mutations++
	return nil
}

// Sync makes the file's current contents and size durable.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.syncLocked()
}

// Datasync is Sync: the model has no metadata that fdatasync may skip.
func (f *memFile) Datasync() error { return f.Sync() }

// failSync is what a failed fsync does on Linux: the dirty sectors are
// marked clean without reaching the disk, so a later fsync does not persist
// them although reads still return them.
func (f *memFile) failSync() {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if len(f.n.dirty) > 0 {
		clear(f.n.dirty)
		f.fs.mutations++
	}
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	if size != int64(len(f.n.data)) {
		f.fs.resizeLocked(f.n, size)
	}
	return nil
}

// Allocate grows the file to off+n with zeros when it is shorter.
func (f *memFile) Allocate(off, n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("allocate", true); err != nil {
		return err
	}
	if off < 0 || n <= 0 {
		return pathErr("allocate", f.name, syscall.EINVAL)
	}
	if end := off + n; end > int64(len(f.n.data)) {
		f.fs.resizeLocked(f.n, end)
	}
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, pathErr("stat", f.name, os.ErrClosed)
	}
	return f.n.infoLocked(path.Base(clean(f.name))), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.closeLocked()
}

func (f *memFile) closeLocked() error {
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}
