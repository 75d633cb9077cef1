package localseg

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// RemoteSource fetches the bytes of an evicted sealed segment from the
// bucket (the shipper's RemoteSegments). A failure is returned as it is;
// the store reports it as ErrRemoteRead, never as corruption.
type RemoteSource interface {
	FetchSegment(ctx context.Context, id uint64) ([]byte, error)
}

// ErrRemoteRead reports an evicted segment that could not be read from the
// bucket: the bucket failed, the object is missing, or its bytes are not
// the ones evicted (length, xxh64 or a frame). The event exists; the read
// may succeed later. It is not ErrCorrupt: the local store is intact.
var ErrRemoteRead = errors.New("localseg: an evicted segment could not be read from the bucket")

// DefaultRemoteCacheBytes bounds the fetched segments kept in memory.
const DefaultRemoteCacheBytes = 64 << 20

// remoteTimeout bounds one fetch of an evicted segment.
const remoteTimeout = 30 * time.Second

// evictState is the store's evicted segments and the cache of their
// fetched bytes. Its own mutex is a leaf: it is taken with or without s.mu,
// and never held across a fetch.
type evictState struct {
	mu      sync.Mutex
	entries map[uint64]evictEntry
	remote  RemoteSource
	lru     *list.List // of *cached, most recent first
	byID    map[uint64]*list.Element
	bytes   int64
	limit   int64
	flight  map[uint64]*fetchCall

	fetches, fetchBytes, hits, misses, failures, evicted atomic.Int64
}

type cached struct {
	id   uint64
	data []byte
}

type fetchCall struct {
	done chan struct{}
	data []byte
	err  error
}

func (e *evictState) init(remote RemoteSource, limit int64) {
	e.remote, e.limit = remote, limit
	if e.limit == 0 {
		e.limit = DefaultRemoteCacheBytes
	}
	e.entries = map[uint64]evictEntry{}
	e.lru, e.byID, e.flight = list.New(), map[uint64]*list.Element{}, map[uint64]*fetchCall{}
}

func (e *evictState) setEntries(entries []evictEntry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range entries {
		e.entries[en.ID] = en
	}
}

// get returns segment id's entry when it is evicted.
func (e *evictState) get(id uint64) (evictEntry, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.entries[id]
	return en, ok
}

// list returns the entries above the reclaim base through, ascending.
func (e *evictState) list(base uint64) []evictEntry {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]evictEntry, 0, len(e.entries))
	for _, en := range e.entries {
		if en.ID > base {
			out = append(out, en)
		}
	}
	sortEntries(out)
	return out
}

// forgetThrough drops the entries (and cached bytes) of segments at or
// below id: reclaimed.
func (e *evictState) forgetThrough(id uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.entries {
		if k <= id {
			delete(e.entries, k)
			if el := e.byID[k]; el != nil {
				e.bytes -= int64(len(el.Value.(*cached).data))
				e.lru.Remove(el)
				delete(e.byID, k)
			}
		}
	}
}

// fetch returns the verified bytes of evicted segment en, from the cache
// or the bucket (one fetch at a time per segment).
func (e *evictState) fetch(en evictEntry) ([]byte, error) {
	e.mu.Lock()
	if el := e.byID[en.ID]; el != nil {
		e.lru.MoveToFront(el)
		e.mu.Unlock()
		e.hits.Add(1)
		return el.Value.(*cached).data, nil
	}
	if c := e.flight[en.ID]; c != nil {
		e.mu.Unlock()
		<-c.done
		return c.data, c.err
	}
	c := &fetchCall{done: make(chan struct{})}
	e.flight[en.ID] = c
	remote := e.remote
	e.mu.Unlock()
	e.misses.Add(1)

	c.data, c.err = fetchVerified(remote, en)
	e.mu.Lock()
	delete(e.flight, en.ID)
	if c.err == nil {
		e.fetches.Add(1)
		e.fetchBytes.Add(int64(len(c.data)))
		if _, still := e.entries[en.ID]; still && int64(len(c.data)) <= e.limit {
			e.byID[en.ID] = e.lru.PushFront(&cached{id: en.ID, data: c.data})
			e.bytes += int64(len(c.data))
			for e.bytes > e.limit {
				old := e.lru.Back()
				v := old.Value.(*cached)
				e.lru.Remove(old)
				delete(e.byID, v.id)
				e.bytes -= int64(len(v.data))
			}
		}
	} else {
		e.failures.Add(1)
	}
	e.mu.Unlock()
	close(c.done)
	return c.data, c.err
}

// fetchVerified fetches en and checks it as a restore checks a segment
// object: its length and xxh64 against what left the disk, and every
// frame (magic, length, CRC, body, consecutive sequences from en.First).
func fetchVerified(remote RemoteSource, en evictEntry) ([]byte, error) {
	if remote == nil {
		return nil, fmt.Errorf("%w: segment %d is evicted and the store has no bucket to read it from", ErrRemoteRead, en.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	data, err := remote.FetchSegment(ctx, en.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: segment %d: %w", ErrRemoteRead, en.ID, err)
	}
	if int64(len(data)) != en.Size || xxhash.Sum64(data) != en.digest {
		return nil, fmt.Errorf("%w: segment %d: the bucket's copy (%d bytes, xxh64 %016x) is not the evicted segment (%d bytes, xxh64 %s)",
			ErrRemoteRead, en.ID, len(data), xxhash.Sum64(data), en.Size, en.XXH64)
	}
	first := en.First
	if first == FirstUnknown {
		first = 0 // a lazy hydrate's: not known (lazyindex.go)
	}
	if _, err := VerifySegment(en.ID, data, first); err != nil {
		return nil, fmt.Errorf("%w: segment %d: the bucket's copy fails verification: %v", ErrRemoteRead, en.ID, err)
	}
	return data, nil
}

// remoteFile is the reader cache's hook: the bytes of segment id when it
// is evicted (ok), fetched and verified.
func (s *Store) remoteFile(id uint64) (File, bool, error) {
	en, ok := s.ev.get(id)
	if !ok {
		return nil, false, nil
	}
	data, err := s.ev.fetch(en)
	if err != nil {
		return nil, true, err
	}
	return memFile(data), true, nil
}

// memFile is a read-only File over verified bytes.
type memFile []byte

func (m memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", ErrInvalidInput)
	}
	if off >= int64(len(m)) {
		return 0, io.EOF
	}
	n := copy(p, m[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

var errMemFile = fmt.Errorf("%w: an evicted segment is read-only", ErrReadOnly)

func (memFile) WriteAt([]byte, int64) (int, error) { return 0, errMemFile }
func (memFile) Sync() error                        { return nil }
func (memFile) Datasync() error                    { return nil }
func (memFile) Truncate(int64) error               { return errMemFile }
func (memFile) Allocate(int64, int64) error        { return errMemFile }
func (memFile) Stat() (os.FileInfo, error)         { return nil, errMemFile }
func (memFile) Close() error                       { return nil }

// RemoteStats counts the reads of evicted segments.
type RemoteStats struct {
	Evicted       int   // segments evicted now
	EvictedBytes  int64 // their bytes
	EvictedTotal  int64 // segments this store evicted since it opened
	Fetches       int64 // segments fetched from the bucket
	FetchBytes    int64
	FetchFailures int64
	CacheHits     int64
	CacheMisses   int64
	CacheBytes    int64
	LocalBytes    int64 // the logical bytes of local segment files, the active one included
	LocalSealed   int64 // those of sealed ones (what the budget bounds)
	LocalSegments int
}

// RemoteStats reports the evicted segments and their reads.
func (s *Store) RemoteStats() RemoteStats {
	s.mu.Lock()
	var r RemoteStats
	for _, seg := range s.segs {
		if en, ok := s.ev.get(seg.id); ok {
			r.Evicted++
			r.EvictedBytes += en.Size
			continue
		}
		r.LocalSegments++
		r.LocalBytes += seg.size
		if seg.sealed {
			r.LocalSealed += seg.size
		}
	}
	s.mu.Unlock()
	e := &s.ev
	r.EvictedTotal, r.Fetches, r.FetchBytes, r.FetchFailures = e.evicted.Load(), e.fetches.Load(), e.fetchBytes.Load(), e.failures.Load()
	r.CacheHits, r.CacheMisses = e.hits.Load(), e.misses.Load()
	e.mu.Lock()
	r.CacheBytes = e.bytes
	e.mu.Unlock()
	return r
}
