package localseg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// readerCache keeps a bounded number of segment files open for reads.
// Handles are reference-counted so a file is closed only when no read
// uses it (a reclaimed segment's handle stays readable until then).
type readerCache struct {
	mu     sync.Mutex
	fs     FS
	dir    string
	open   map[uint64]*rfile
	clock  uint64
	closed bool
	// remote serves an evicted segment (remote.go): ok when id is evicted.
	remote func(id uint64) (File, bool, error)
}

type rfile struct {
	id   uint64
	f    File
	refs int
	used uint64
	dead bool
}

const maxOpenReaders = 32

func (c *readerCache) init(fsys FS, dir string) {
	c.fs, c.dir, c.open = fsys, dir, make(map[uint64]*rfile)
}

// get opens segment id for a read: an evicted one from the bucket (not
// kept among the open files; its fetched bytes are cached by the store),
// including one evicted after its file was looked for.
func (c *readerCache) get(id uint64) (*rfile, error) {
	if r, ok, err := c.getRemote(id); ok {
		return r, err
	}
	r, err := c.getLocal(id)
	if errors.Is(err, fs.ErrNotExist) {
		if r, ok, rerr := c.getRemote(id); ok {
			return r, rerr
		}
	}
	return r, err
}

func (c *readerCache) getRemote(id uint64) (*rfile, bool, error) {
	if c.remote == nil {
		return nil, false, nil
	}
	f, ok, err := c.remote(id)
	if !ok || err != nil {
		return nil, ok, err
	}
	return &rfile{id: id, f: f, refs: 1, dead: true}, true, nil
}

func (c *readerCache) getLocal(id uint64) (*rfile, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	c.clock++
	if r := c.open[id]; r != nil {
		r.refs++
		r.used = c.clock
		return r, nil
	}
	f, err := c.fs.OpenFile(filepath.Join(c.dir, SegmentFileName(id)), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	r := &rfile{id: id, f: f, refs: 1, used: c.clock}
	c.open[id] = r
	for len(c.open) > maxOpenReaders {
		var victim *rfile
		for _, o := range c.open {
			if o.refs == 0 && (victim == nil || o.used < victim.used) {
				victim = o
			}
		}
		if victim == nil {
			break
		}
		delete(c.open, victim.id)
		victim.f.Close()
	}
	return r, nil
}

func (c *readerCache) put(r *rfile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.refs--
	if r.refs == 0 && r.dead {
		r.f.Close()
	}
}

// drop forgets segment id (reclaimed); an in-use handle closes when
// released.
func (c *readerCache) drop(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.open[id]; r != nil {
		delete(c.open, id)
		r.dead = true
		if r.refs == 0 {
			r.f.Close()
		}
	}
}

func (c *readerCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, r := range c.open {
		delete(c.open, id)
		r.dead = true
		if r.refs == 0 {
			r.f.Close()
		}
	}
}

// readAt reads len(p) bytes at off of segment id.
func (s *Store) readAt(id uint64, p []byte, off int64) error {
	r, err := s.readers.get(id)
	if err != nil {
		return s.readErr(id, err)
	}
	defer s.readers.put(r)
	if err := readFull(r.f, p, off); err != nil {
		return fmt.Errorf("localseg: read segment %d at %d: %w", id, off, err)
	}
	return nil
}

// readErr explains a failed open of a segment for reading: a segment
// reclaimed meanwhile reads as ErrReclaimed.
func (s *Store) readErr(id uint64, err error) error {
	s.mu.Lock()
	reclaimed := id <= s.reclaimedSeg
	s.mu.Unlock()
	if reclaimed {
		return fmt.Errorf("%w: segment %d", ErrReclaimed, id)
	}
	return fmt.Errorf("localseg: open segment %d: %w", id, err)
}
