package coldload

import (
	"sync"

	"github.com/bucketlog/bucketlog/blobtier"
)

// bufPool holds the segment phase's read buffers for reuse: a worker takes
// one, reads an object into it (blobtier.GetWatched), verifies and writes
// it, and puts it back for the next object. At most one buffer per worker
// exists, so memory stays at the concurrency window, as before, and a
// restore of any length allocates, zeroes and faults in only that window
// once instead of once per object. Nothing of an object outlives its turn
// in the buffer: the summary, the consumer frames (copied strings) and the
// errors hold no slice of it.
type bufPool struct {
	size int // capacity of a new buffer: the largest listed object + 1
	mu   sync.Mutex
	free [][]byte
}

// newBufPool sizes the buffers for the largest of the objects (by their
// listed sizes, at most blobtier.MaxObjectBytes): segment objects differ
// by a frame or so, and a buffer sized for one would be a byte short for
// the next. An object longer than listed still reads (GetBuffered then
// allocates for it).
func newBufPool(items []*segItem) *bufPool {
	var largest int64
	for _, it := range items {
		largest = max(largest, min(it.size, blobtier.MaxObjectBytes))
	}
	return &bufPool{size: int(largest) + 1}
}

// get returns a free buffer, or a new one.
func (p *bufPool) get() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return make([]byte, 0, p.size)
	}
	b := p.free[n-1]
	p.free = p.free[:n-1]
	return b
}

// put gives b back once nothing refers to its contents.
func (p *bufPool) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	p.free = append(p.free, b[:0])
	p.mu.Unlock()
}
