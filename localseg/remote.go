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

	"github.com/bucketlog/bucketlog/frame"
)

// RemoteSource fetches the bytes of an evicted sealed segment from the
// bucket (the shipper's RemoteSegments). A failure is returned as it is;
// the store reports it as ErrRemoteRead, never as corruption.
type RemoteSource interface {
	// FetchSegment returns the segment object's bytes and their xxh64,
	// computed as they were read (the store compares it with what it
	// evicted instead of hashing the bytes a second time).
	FetchSegment(ctx context.Context, id uint64) (data []byte, xxh64 uint64, err error)
}

// WatchedSource is implemented by a RemoteSource that can show the bytes
// to a frame.Verifier as they arrive (the shipper's RemoteSegments): the
// store's check of every frame then overlaps the download. Its result is
// FetchSegment's; v saw exactly the bytes returned when err is nil, and
// counts for nothing otherwise (v may be nil).
type WatchedSource interface {
	FetchSegmentWatched(ctx context.Context, id uint64, v *frame.Verifier) (data []byte, xxh64 uint64, err error)
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
	// ahead is the read-ahead slot (readAhead): at most one segment
	// fetched before a scan asks for it, held beside the LRU so that it
	// never evicts what a page is reading. A read of it moves it into the
	// LRU.
	ahead     *aheadCall
	inline    bool            // Options.ReadAheadInline
	ctx       context.Context // cancelled at close: ends a read-ahead
	cancel    context.CancelFunc
	aheadDone sync.WaitGroup

	aheads,
	fetches, fetchBytes, hits, misses, failures, evicted atomic.Int64
}

type cached struct {
	id   uint64
	data []byte
}

type fetchCall struct {
	done  chan struct{}
	data  []byte
	err   error
	ahead bool // a read-ahead's: when it failed, a read waiting on it fetches again
}

// aheadCall is a read-ahead's fetch. Its fields other than the fetchCall's
// are guarded by evictState.mu.
type aheadCall struct {
	id uint64
	*fetchCall
	finished bool // its fetch returned (data, err are set)
	taken    bool // handed to reads as a fetch in flight: it files its bytes in the LRU
}

func (e *evictState) init(remote RemoteSource, limit int64, inline bool) {
	e.remote, e.limit, e.inline = remote, limit, inline
	if e.limit == 0 {
		e.limit = DefaultRemoteCacheBytes
	}
	e.entries = map[uint64]evictEntry{}
	e.lru, e.byID, e.flight = list.New(), map[uint64]*list.Element{}, map[uint64]*fetchCall{}
	e.ctx, e.cancel = context.WithCancel(context.Background())
}

// close ends a read-ahead in flight and waits for it (Store.Close). The
// cancel is under mu, where readAhead checks it before it counts a new
// read-ahead: none is counted once the wait may have begun.
func (e *evictState) close() {
	e.mu.Lock()
	e.cancel()
	e.mu.Unlock()
	e.aheadDone.Wait()
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
	if e.ahead != nil && e.ahead.id <= id {
		e.ahead = nil // its goroutine ends on its own; nobody takes its bytes
	}
}

// readAhead starts fetching evicted segment en before a sequential read
// (a scan, a pull, a stream) reaches it, so that its GET overlaps the
// checks and decoding of the segment before it. It does nothing when en is
// cached, being fetched, larger than the cache, or when a read-ahead is
// still in flight; a finished read-ahead nobody took is dropped. Memory:
// at most one segment beside the cache and the fetches reads wait for. A
// failed read-ahead is forgotten: a read that wanted it fetches again and
// reports its own outcome.
func (e *evictState) readAhead(en *evictEntry) {
	if en == nil {
		return
	}
	e.mu.Lock()
	if e.remote == nil || e.ctx.Err() != nil || e.byID[en.ID] != nil || e.flight[en.ID] != nil || en.Size > e.limit {
		e.mu.Unlock()
		return
	}
	if a := e.ahead; a != nil && (!a.finished || (a.id == en.ID && a.err == nil)) {
		e.mu.Unlock()
		return
	}
	a := &aheadCall{id: en.ID, fetchCall: &fetchCall{done: make(chan struct{}), ahead: true}}
	e.ahead = a
	e.aheads.Add(1)
	e.aheadDone.Add(1)
	remote, ctx, inline := e.remote, e.ctx, e.inline
	e.mu.Unlock()
	fetch := func() {
		defer e.aheadDone.Done()
		data, err := fetchVerified(ctx, remote, *en)
		e.mu.Lock()
		a.data, a.err, a.finished = data, err, true
		if err == nil {
			e.fetches.Add(1)
			e.fetchBytes.Add(int64(len(data)))
		}
		if a.taken {
			delete(e.flight, a.id)
			if err == nil {
				e.keepLocked(a.id, data)
			}
		}
		e.mu.Unlock()
		close(a.done)
	}
	if inline {
		fetch()
		return
	}
	go fetch()
}

// takeAheadLocked hands the read-ahead of a segment in [lo, hi] over to
// the reads: its bytes go into the LRU, or, still in flight, it becomes
// the segment's fetch in flight. It returns the segment's id, if any.
func (e *evictState) takeAheadLocked(lo, hi uint64) (uint64, bool) {
	a := e.ahead
	if a == nil || a.id < lo || a.id > hi {
		return 0, false
	}
	e.ahead = nil
	switch {
	case !a.finished:
		a.taken = true
		e.flight[a.id] = a.fetchCall
	case a.err == nil:
		e.keepLocked(a.id, a.data)
	}
	return a.id, true
}

// keepLocked puts a segment's fetched bytes into the LRU while it is still
// evicted, evicting the least recently used past the limit.
func (e *evictState) keepLocked(id uint64, data []byte) {
	if _, still := e.entries[id]; !still || int64(len(data)) > e.limit || e.byID[id] != nil {
		return
	}
	e.byID[id] = e.lru.PushFront(&cached{id: id, data: data})
	e.bytes += int64(len(data))
	for e.bytes > e.limit {
		old := e.lru.Back()
		v := old.Value.(*cached)
		e.lru.Remove(old)
		delete(e.byID, v.id)
		e.bytes -= int64(len(v.data))
	}
}

// fetch returns the verified bytes of evicted segment en, from the cache
// or the bucket (one fetch at a time per segment).
func (e *evictState) fetch(en evictEntry) ([]byte, error) {
	e.mu.Lock()
	for {
		if el := e.byID[en.ID]; el != nil {
			e.lru.MoveToFront(el)
			e.mu.Unlock()
			e.hits.Add(1)
			return el.Value.(*cached).data, nil
		}
		if c := e.flight[en.ID]; c != nil {
			e.mu.Unlock()
			<-c.done
			if c.err == nil || !c.ahead {
				return c.data, c.err
			}
			e.mu.Lock()
			continue // a read-ahead that failed: fetch it here
		}
		if _, ok := e.takeAheadLocked(en.ID, en.ID); !ok {
			break
		}
	}
	e.misses.Add(1)
	c := &fetchCall{done: make(chan struct{})}
	e.flight[en.ID] = c
	remote, ctx := e.remote, e.ctx
	e.mu.Unlock()

	c.data, c.err = fetchVerified(ctx, remote, en)
	e.mu.Lock()
	delete(e.flight, en.ID)
	if c.err == nil {
		e.fetches.Add(1)
		e.fetchBytes.Add(int64(len(c.data)))
		e.keepLocked(en.ID, c.data)
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
// The frames are checked as the bytes arrive when the source can show
// them (WatchedSource); their verdict is read only after the length and
// digest checks passed, so every failure is reported as before.
func fetchVerified(ctx context.Context, remote RemoteSource, en evictEntry) ([]byte, error) {
	if remote == nil {
		return nil, fmt.Errorf("%w: segment %d is evicted and the store has no bucket to read it from", ErrRemoteRead, en.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	first := en.First
	if first == FirstUnknown {
		first = 0 // a lazy hydrate's: not known (lazyindex.go)
	}
	v := frame.NewVerifier(en.ID, first)
	var data []byte
	var sum uint64
	var err error
	if ws, ok := remote.(WatchedSource); ok {
		data, sum, err = ws.FetchSegmentWatched(ctx, en.ID, v)
	} else {
		data, sum, err = remote.FetchSegment(ctx, en.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: segment %d: %w", ErrRemoteRead, en.ID, err)
	}
	if int64(len(data)) != en.Size || sum != en.digest {
		return nil, fmt.Errorf("%w: segment %d: the bucket's copy (%d bytes, xxh64 %016x) is not the evicted segment (%d bytes, xxh64 %s)",
			ErrRemoteRead, en.ID, len(data), sum, en.Size, en.XXH64)
	}
	if _, err := v.Finish(data); err != nil {
		return nil, fmt.Errorf("%w: segment %d: the bucket's copy fails verification: %v", ErrRemoteRead, en.ID, err)
	}
	return data, nil
}

// maxPageTouch bounds the segments readAheadLocked looks at for a page.
const maxPageTouch = 64

// pageHold is a page's evicted segments whose fetched copies were cached
// when it was located, held for its reads (readLocsInto): a fetch by one
// part of a parallel read cannot push out of the cache a segment another
// part has yet to read.
type pageHold map[uint64]memFile

// readAheadLocked prepares a sequential read (a scan, a pull, a stream)
// of locs: it holds the page's cached evicted segments (marked used, in
// order), files the read-ahead of one of them, and starts the read-ahead
// (evictState.readAhead) of the evicted segment after the page's last,
// where the read goes next: it returns that segment's entry, for
// evictState.readAhead once s.mu is released. Per-execution reads never
// call it: they must not fetch a segment that holds none of their events.
func (s *Store) readAheadLocked(locs []loc) (pageHold, *evictEntry) {
	if len(locs) == 0 {
		return nil, nil
	}
	lo, hi := locs[0].seg, locs[len(locs)-1].seg
	var hold pageHold
	e := &s.ev
	e.mu.Lock()
	held := func(id uint64) {
		if el := e.byID[id]; el != nil {
			e.lru.MoveToFront(el) // used now
			if hold == nil {
				hold = pageHold{}
			}
			hold[id] = memFile(el.Value.(*cached).data)
		}
	}
	for id := lo; id <= hi && hi-lo < maxPageTouch; id++ {
		held(id)
	}
	if id, ok := e.takeAheadLocked(lo, hi); ok { // the slot is free for the next one
		held(id)
	}
	e.mu.Unlock()
	if i, ok := s.segIndexOf(hi); ok && i+1 < len(s.segs) {
		if en, ok := e.get(s.segs[i+1].id); ok {
			return hold, &en
		}
	}
	return hold, nil
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
	ReadAheads    int64 // fetches a sequential read started before it reached the segment
	LocalBytes    int64 // the logical bytes of local segment files, the active one included
	LocalSealed   int64 // those of sealed ones (what the budget bounds)
	LocalSegments int
	Healed        int64 // corrupt sealed segments replaced by their bucket copies since open (heal.go)
	Corrupt       int   // corrupt sealed segments no verified bucket copy replaced
	IndexFetches  int64 // index objects of evicted segments fetched (indexobj.go)
	IndexUsed     int64 // of them, used: they describe their segments exactly
	IndexRefused  int64 // of them, ignored: they do not (the segment was read instead)
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
	r.CacheHits, r.CacheMisses, r.ReadAheads = e.hits.Load(), e.misses.Load(), e.aheads.Load()
	e.mu.Lock()
	r.CacheBytes = e.bytes
	e.mu.Unlock()
	r.Healed = s.hl.healed.Load()
	r.IndexFetches, r.IndexUsed, r.IndexRefused = s.idxObj.fetched.Load(), s.idxObj.used.Load(), s.idxObj.refused.Load()
	s.hl.badMu.Lock()
	r.Corrupt = len(s.hl.bad)
	s.hl.badMu.Unlock()
	return r
}
