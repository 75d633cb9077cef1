package localseg

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/bucketlog/bucketlog/internal/redcontrol"
)

// Index objects (docs/FORMAT.md §6.10): the index file of a sealed segment
// (§3.6, segindex.go), put in the bucket beside the segment's object, so a
// store that never held the segment (a lazy hydrate: ImportEvicted) can
// locate its events without fetching it. They are derived and never needed
// for correctness: one that is missing, fails to decode, or does not
// describe exactly the evicted segment's bytes is ignored, and the segment
// is fetched and scanned as before.
//
// Trust rule, the local index file's (§3.6) with the evicted record as the
// segment's witness: the object decodes (its own xxh64, magic, version,
// segment id and length), the segment length and xxh64 it records are the
// ones evicted.json holds for the segment (which the store checks every
// fetched copy against), and its first event is the record's when the
// record knows it. The object then describes exactly the bytes every read
// of the segment is checked against, whoever wrote it: a stale writer's
// index of another segment under the same id records another digest.

// IndexSource is implemented by a RemoteSource that can also fetch a
// segment's index object (the shipper's RemoteSegments). A failure of any
// kind (missing, damaged, the bucket failing) only sends the read to the
// segment itself.
type IndexSource interface {
	FetchIndex(ctx context.Context, id uint64) ([]byte, error)
}

// indexFetchConcurrency bounds the index objects a full index build
// fetches at once.
const indexFetchConcurrency = 8

// idxObjStats counts the index objects the store fetched.
type idxObjStats struct {
	fetched, used, refused atomic.Int64
}

// SegmentIndexObject returns the body of sealed segment id's index object:
// the index file (§3.6) describing data, its bytes, which the caller has
// verified frame by frame (the uploader, before the segment's put). The
// local index file is reused when it describes exactly these bytes;
// otherwise the index is built from data. It is safe for concurrent use
// and changes nothing on disk.
func (s *Store) SegmentIndexObject(id uint64, data []byte) ([]byte, error) {
	size, digest := int64(len(data)), xxhash.Sum64(data)
	if raw, err := readSegIdxFile(s.fs, s.dir, id); err == nil {
		if _, d, err := decodeSegIndex(raw, id, size); err == nil && d == digest {
			return raw, nil
		}
	}
	open := func(uint64) (io.ReaderAt, func(), error) { return memFile(data), func() {}, nil }
	p, _ := scanRange(open, segRange{id: id, to: size, sealed: true}, nil, nil)
	if p.err != nil {
		return nil, p.err
	}
	return encodeSegIndex(p, size, digest), nil
}

// indexObjectPiece returns the piece of evicted segment rg from its index
// object (fetch gets its body) when the object passes the trust rule above.
func (s *Store) indexObjectPiece(rg segRange, fetch func(id uint64) ([]byte, error)) (*piece, []byte, bool) {
	en, ok := s.ev.get(rg.id)
	if !ok || en.Size != rg.to || fetch == nil {
		return nil, nil, false
	}
	raw, err := fetch(rg.id)
	if err != nil || raw == nil {
		return nil, nil, false
	}
	p, d, err := decodeSegIndex(raw, rg.id, rg.to)
	if err == nil && d == en.digest && en.First != FirstUnknown {
		switch {
		case p.n == 0:
			ok = en.First == 0
		default:
			ok = en.First == p.first
		}
		if !ok {
			err = errSegIdx
		}
	}
	if redcontrol.IndexObjectsUnchecked.Load() && len(raw) >= segIdxHeader {
		// The RED control's engine: any index object that decodes as the
		// one of whatever segment its header names is taken for this one.
		le := binary.LittleEndian
		if q, _, qerr := decodeSegIndex(raw, le.Uint64(raw[8:]), int64(le.Uint64(raw[16:]))); qerr == nil {
			q.id, q.offs.id = rg.id, rg.id
			p, d, err = q, en.digest, nil
		}
	}
	if err != nil || d != en.digest {
		s.idxObj.refused.Add(1)
		return nil, nil, false
	}
	s.idxObj.used.Add(1)
	return p, raw, true
}

// fetchIndexObject fetches segment id's index object through the store's
// remote source, when it can; nil without one.
func (s *Store) fetchIndexObject(id uint64) ([]byte, error) {
	src, ok := s.ev.remote.(IndexSource)
	if !ok {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(s.ev.ctx, remoteTimeout)
	defer cancel()
	s.idxObj.fetched.Add(1)
	return src.FetchIndex(ctx, id)
}

// prefetchIndexObjects returns, for a full index build, the fetch of the
// index objects of the evicted segments among snap that have no local
// index file, read ahead in id order (the order the build asks for them):
// asking for one starts the fetches of up to indexFetchConcurrency after
// it, so the round trips overlap and at most that many bodies wait in
// memory. An id asked for a second time (a replay run again), or one it
// was not built for, is fetched at once.
func (s *Store) prefetchIndexObjects(snap []segRange) *idxReadAhead {
	if _, ok := s.ev.remote.(IndexSource); !ok {
		return nil
	}
	p := &idxReadAhead{s: s, pos: map[uint64]int{}, calls: map[uint64]*idxCall{}}
	for _, rg := range snap {
		en, ok := s.ev.get(rg.id)
		if !ok || !rg.sealed || en.Size != rg.to {
			continue
		}
		if _, err := s.fs.Stat(filepath.Join(s.dir, SegmentIndexFileName(rg.id))); err == nil {
			continue // the replay loads the local file
		}
		p.pos[rg.id] = len(p.ids)
		p.ids = append(p.ids, rg.id)
	}
	return p
}

// idxReadAhead is prefetchIndexObjects' read-ahead.
type idxReadAhead struct {
	s     *Store
	ids   []uint64       // to fetch, ascending
	pos   map[uint64]int // id → its place in ids
	mu    sync.Mutex
	next  int // the first of ids not started
	calls map[uint64]*idxCall
	wg    sync.WaitGroup
}

type idxCall struct {
	done chan struct{}
	raw  []byte
	err  error
}

func (p *idxReadAhead) get(id uint64) ([]byte, error) {
	i, ok := p.pos[id]
	if !ok {
		return p.s.fetchIndexObject(id)
	}
	p.mu.Lock()
	for ; p.next < len(p.ids) && p.next <= i+indexFetchConcurrency; p.next++ {
		c := &idxCall{done: make(chan struct{})}
		p.calls[p.ids[p.next]] = c
		p.wg.Add(1)
		go func(id uint64) {
			defer p.wg.Done()
			c.raw, c.err = p.s.fetchIndexObject(id)
			if c.err == nil && c.raw == nil {
				c.err = errSegIdx
			}
			close(c.done)
		}(p.ids[p.next])
	}
	c := p.calls[id]
	delete(p.calls, id)
	p.mu.Unlock()
	if c == nil {
		return p.s.fetchIndexObject(id) // asked for before: a replay run again
	}
	<-c.done
	return c.raw, c.err
}

// wait waits for the fetches started and not asked for (a build that
// ended early).
func (p *idxReadAhead) wait() { p.wg.Wait() }

// CheckIndexObject reports whether raw is an index object of segment id
// that describes exactly a segment of length size whose bytes hash to
// digest (the trust rule above, for a checker that knows the segment
// object's metadata: verify). A nil error means a reader would use it.
func CheckIndexObject(raw []byte, id uint64, size int64, digest uint64) error {
	_, d, err := decodeSegIndex(raw, id, size)
	switch {
	case err != nil:
		return fmt.Errorf("%w (magic, version, segment id %d, length %d or layout)", err, id, size)
	case d != digest:
		return fmt.Errorf("%w: it records xxh64 %016x, the segment's bytes hash to %016x", errSegIdx, d, digest)
	}
	return nil
}
