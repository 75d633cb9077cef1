package localseg

import (
	"errors"
	"fmt"
	"hash/maphash"
	"os"

	"github.com/bucketlog/bucketlog/frame"
)

// The transaction window: retry-safe appends.
//
// The store remembers the transaction ids of its newest events, at most
// Options.TransactionWindow of them (DefaultTransactionWindow), each with
// its sequence and a hash of its execution id and payload. An append whose
// transaction id the window holds is not written: the same content answers
// the original sequence (AppendResult.Duplicate), other content is refused
// with ErrTransactionConflict naming that sequence. The check runs under
// the store's mutex in the same step that assigns the next sequence, and
// an event enters the window when it is queued, not when its group is
// durable, so two appends of one id racing into one group (or one batch)
// cannot both be written; a retry of an event still in flight waits for
// its group and shares its outcome.
//
// The window is exactly the newest N events above the reclaim base: it is
// rebuilt at every writable open from the newest frames on the local disk
// (segments read from the active one backwards until N events were found,
// so open reads O(N) frames, never the whole log), and a reclaim drops the
// ids of the events it removed. A restart, a crash, a hydrate or a restore
// therefore remembers what an uninterrupted process would, as far as the
// frames are on the disk.
//
// Memory: each entry is a 128-bit keyed hash of the transaction id and a
// 64-bit keyed hash of its content (24 bytes in a ring in sequence order,
// which gives the sequence) and a 4-byte slot of an open-addressing table
// kept at most half full: 34 bytes an entry measured, at most 48
// (TestTxWindowMemoryPerEntry), whatever the ids' length; so a full
// default window costs about 3.4 MB a shard, and nothing is allocated up
// front. The hashes are keyed with seeds drawn at open: no input can be
// crafted to collide, two different ids share a key with probability
// 2^-128, and two different contents under one id pass as the same with
// probability 2^-64.

// DefaultTransactionWindow is the number of transaction ids a store
// remembers when Options.TransactionWindow is 0.
const DefaultTransactionWindow = 100_000

// txKey is the keyed 128-bit hash of a transaction id.
type txKey [2]uint64

type txEntry struct {
	seq     uint64
	content uint64 // keyed hash of the execution id and payload
}

// txWindow is the set of remembered transaction ids. Guarded by Store.mu.
//
// The entries sit in a ring in sequence order (the oldest at head), so an
// entry's sequence is its distance from head plus lo; an open-addressing
// table (linear probing, at most half full) maps a key to its ring
// position + 1 (0: empty), and an eviction deletes by backward shift, so
// no tombstones accumulate.
type txWindow struct {
	max          int
	seedA, seedB maphash.Seed
	seedC        maphash.Seed
	ring         []txSlot // grows up to max
	head, n      int
	lo           uint64
	table        []uint32 // a power of two, at least twice len(ring)
}

type txSlot struct {
	key     txKey
	content uint64
}

func newTxWindow(max int, readOnly bool) *txWindow {
	if max < 0 || readOnly {
		return nil
	}
	if max == 0 {
		max = DefaultTransactionWindow
	}
	return &txWindow{max: max, seedA: maphash.MakeSeed(), seedB: maphash.MakeSeed(), seedC: maphash.MakeSeed()}
}

// hash sets v's key and content hash (outside the store's mutex: it reads
// the whole payload). A nil window (de-duplication off) does nothing.
func (w *txWindow) hash(v *validEvent) {
	if w == nil {
		return
	}
	v.key, v.content, v.hashed = w.keyOf(v.txn), w.contentOf(v.exec, v.payload), true
}

func (w *txWindow) keyOf(txn string) txKey {
	return txKey{maphash.String(w.seedA, txn), maphash.String(w.seedB, txn)}
}

// keyOfBytes and contentOfBytes are keyOf and contentOf of the bytes of
// a string (maphash gives the same value for both).
func (w *txWindow) keyOfBytes(txn []byte) txKey {
	return txKey{maphash.Bytes(w.seedA, txn), maphash.Bytes(w.seedB, txn)}
}

func (w *txWindow) contentOfBytes(exec, payload []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(w.seedC)
	h.Write(exec)
	h.WriteByte(0)
	h.Write(payload)
	return h.Sum64()
}

func (w *txWindow) contentOf(exec, payload string) uint64 {
	var h maphash.Hash
	h.SetSeed(w.seedC)
	h.WriteString(exec)
	h.WriteByte(0) // never in an execution id
	h.WriteString(payload)
	return h.Sum64()
}

// lookup returns the entry of v's transaction id.
func (w *txWindow) lookup(v *validEvent) (txEntry, bool) {
	if w == nil {
		return txEntry{}, false
	}
	if !v.hashed {
		w.hash(v)
	}
	if i, ok := w.find(v.key); ok {
		p := int(w.table[i] - 1)
		return txEntry{seq: w.seqAt(p), content: w.ring[p].content}, true
	}
	return txEntry{}, false
}

// find returns the table slot holding k.
func (w *txWindow) find(k txKey) (int, bool) {
	if len(w.table) == 0 {
		return 0, false
	}
	mask := len(w.table) - 1
	for i := int(k[0]) & mask; w.table[i] != 0; i = (i + 1) & mask {
		if w.ring[w.table[i]-1].key == k {
			return i, true
		}
	}
	return 0, false
}

// seqAt is the sequence of the entry at ring position p.
func (w *txWindow) seqAt(p int) uint64 {
	return w.lo + uint64((p-w.head+len(w.ring))%len(w.ring))
}

// index points the table at ring position p for its key: a key already
// there (a log written without de-duplication can hold an id twice) now
// means the newer event.
func (w *txWindow) index(p int) {
	k := w.ring[p].key
	mask := len(w.table) - 1
	i := int(k[0]) & mask
	for w.table[i] != 0 && w.ring[w.table[i]-1].key != k {
		i = (i + 1) & mask
	}
	w.table[i] = uint32(p + 1)
}

// unindex removes table slot i, shifting back the entries after it that
// may sit at or before it (Knuth's algorithm R: no tombstones).
func (w *txWindow) unindex(i int) {
	mask := len(w.table) - 1
	for j := i; ; {
		j = (j + 1) & mask
		if w.table[j] == 0 {
			break
		}
		h := int(w.ring[w.table[j]-1].key[0]) & mask
		if i < j && i < h && h <= j || i > j && (h > i || h <= j) {
			continue // its home is after i: it stays
		}
		w.table[i] = w.table[j]
		i = j
	}
	w.table[i] = 0
}

// alloc gives the window room for c entries, keeping those it holds.
func (w *txWindow) alloc(c int) {
	nr := make([]txSlot, c)
	for i := range w.n {
		nr[i] = w.ring[(w.head+i)%len(w.ring)]
	}
	w.ring, w.head = nr, 0
	size := 1
	for size < 2*c {
		size <<= 1
	}
	w.table = make([]uint32, size)
	for p := range w.n {
		w.index(p)
	}
}

// add remembers the event v at seq, which continues the window; the
// oldest entry leaves when the window is full.
func (w *txWindow) add(v *validEvent, seq uint64) {
	if w == nil {
		return
	}
	if !v.hashed {
		w.hash(v)
	}
	w.put(v.key, v.content, seq)
}

func (w *txWindow) put(k txKey, content, seq uint64) {
	if w.n > 0 && seq != w.lo+uint64(w.n) {
		// Not the next sequence (it cannot happen: events are queued in
		// order). Start over rather than pair keys with wrong sequences.
		w.reset()
	}
	if w.n == 0 {
		w.lo, w.head = seq, 0
	}
	if w.n == w.max {
		w.evictOldest()
	}
	if w.n == len(w.ring) {
		w.alloc(min(max(2*len(w.ring), 64), w.max))
	}
	p := (w.head + w.n) % len(w.ring)
	w.ring[p] = txSlot{key: k, content: content}
	w.n++
	w.index(p)
}

func (w *txWindow) evictOldest() {
	if i, ok := w.find(w.ring[w.head].key); ok && int(w.table[i]-1) == w.head {
		w.unindex(i)
	}
	w.head = (w.head + 1) % len(w.ring)
	w.lo++
	w.n--
}

// dropThrough forgets the events at or below seq (reclaimed).
func (w *txWindow) dropThrough(seq uint64) {
	if w == nil {
		return
	}
	for w.n > 0 && w.lo <= seq {
		w.evictOldest()
	}
}

func (w *txWindow) reset() {
	clear(w.table)
	w.head, w.n = 0, 0
}

// Len is the number of transaction ids the window holds.
func (w *txWindow) Len() int {
	if w == nil {
		return 0
	}
	return w.n
}

// txRec is one event found by the rebuild.
type txRec struct {
	seq     uint64
	key     txKey
	content uint64
}

// rebuildTxWindow fills the window from the newest retained frames: the
// segments from the active one backwards until the window is full (or the
// first retained segment was read). It runs in a writable open, after
// recovery, before the store is shared. A frame that does not check out in
// a sealed segment (which an O(1) open has not replayed) ends the rebuild
// there: the window then covers the events after it, and it is logged
// (the first read reports the corruption).
func (s *Store) rebuildTxWindow() error {
	w := s.txns
	if w == nil || s.tip == s.reclaimedSeq {
		return nil
	}
	var chunks [][]txRec // newest segment first
	found := 0
	var buf []byte
	next := s.tip + 1 // the sequence the newest event of the next chunk must end below
	for i := len(s.segs) - 1; i >= 0 && found < w.max && next > s.reclaimedSeq+1; i-- {
		seg := s.segs[i]
		var recs []txRec
		var err error
		buf, recs, err = s.txRecsOf(seg, buf)
		var ce *CorruptionError
		if err != nil && seg.sealed && errors.As(err, &ce) {
			// Damaged on the disk: its verified bucket copy holds the ids
			// (heal.go); without one a retry could be written twice.
			if data, _, ok := s.copyOf(seg.id, seg.size, err); ok {
				buf, recs, err = s.txRecsIn(seg, memFile(data), buf)
			} else if s.ev.remote != nil {
				err = fmt.Errorf("%w: segment %d is damaged on the local disk and its bucket copy could not be read: %v", ErrRemoteRead, seg.id, err)
			}
		}
		if err != nil {
			if errors.Is(err, ErrRemoteRead) {
				// An evicted segment the bucket does not serve now: the
				// window would miss its ids, and a retry of one of them
				// would be written twice. The open goes on (it changed
				// nothing it may not) and reads work, but every write is
				// refused until a reopen finds the bucket answering
				// (evict.go).
				s.poison = fmt.Errorf("%w: the transaction window could not be rebuilt from a segment only the bucket serves (evicted, or damaged on the local disk); reopen once the bucket answers: %w", ErrPoisoned, err)
				s.log.Error("localseg: transaction window incomplete: writes refused until the store is reopened with the bucket answering", "dir", s.dir, "segment", seg.id, "err", err)
				break
			}
			if !errors.As(err, &ce) {
				return err
			}
			s.log.Warn("localseg: transaction window rebuilt only from the segments after a damaged one", "dir", s.dir, "segment", seg.id, "err", err)
			s.txStop = seg.id // a heal of it rebuilds the window (heal.go)
			break
		}
		if len(recs) == 0 {
			continue
		}
		if last := recs[len(recs)-1].seq; last != next-1 || recs[0].seq+uint64(len(recs))-1 != last {
			s.log.Warn("localseg: transaction window rebuilt only from the segments after one whose sequences do not continue", "dir", s.dir, "segment", seg.id, "first", recs[0].seq, "last", last, "want_last", next-1)
			break
		}
		next = recs[0].seq
		chunks = append(chunks, recs)
		found += len(recs)
	}
	skip := max(found-w.max, 0)
	if w.n == 0 && found > 0 {
		w.alloc(found - skip) // sized once: no growth while the entries go in
	}
	for i := len(chunks) - 1; i >= 0; i-- {
		for _, r := range chunks[i] {
			if skip > 0 {
				skip--
				continue
			}
			if r.seq > s.reclaimedSeq {
				w.put(r.key, r.content, r.seq)
			}
		}
	}
	return nil
}

// txRecsOf reads the events of seg (its logical extent) with their hashed
// transaction ids, reusing buf.
func (s *Store) txRecsOf(seg *segment, buf []byte) ([]byte, []txRec, error) {
	if seg.size == 0 {
		return buf, nil, nil
	}
	f := seg.f
	if rf, ok, err := s.remoteFile(seg.id); ok {
		// Evicted (evict.go): the window still covers it, from the bucket.
		if err != nil {
			return buf, nil, err
		}
		f = rf
	}
	if f == nil {
		var err error
		if f, err = s.fs.OpenFile(s.segPath(seg.id), os.O_RDONLY, 0); err != nil {
			return buf, nil, fmt.Errorf("localseg: open segment %d: %w", seg.id, err)
		}
		defer f.Close()
	}
	return s.txRecsIn(seg, f, buf)
}

// txRecsIn is txRecsOf reading seg's bytes from f.
func (s *Store) txRecsIn(seg *segment, f File, buf []byte) ([]byte, []txRec, error) {
	buf, err := readSeg(f, seg.id, buf, 0, seg.size)
	if err != nil {
		return buf, nil, err
	}
	w := s.txns
	var recs []txRec
	for o := 0; o < len(buf); {
		n, body, err := frame.At(buf, o)
		if err != nil {
			return buf, nil, &CorruptionError{Segment: seg.id, Offset: int64(o), Err: err}
		}
		rec, isEvent, err := w.recOf(body)
		if err != nil {
			return buf, nil, &CorruptionError{Segment: seg.id, Offset: int64(o), Err: err}
		}
		if isEvent {
			recs = append(recs, rec)
		}
		o += n
	}
	return buf, recs, nil
}

// recOf hashes the event in a frame body; false for a consumer frame.
func (w *txWindow) recOf(body []byte) (txRec, bool, error) {
	if v, ok := frame.ParseFast(body); ok {
		if v.Kind != KindEvent {
			return txRec{}, false, nil
		}
		txn, exec, payload := spanBytes(body, v.Txn), spanBytes(body, v.Exec), spanBytes(body, v.Payload)
		return txRec{seq: v.Seq, key: w.keyOfBytes(txn), content: w.contentOfBytes(exec, payload)}, true, nil
	}
	f, err := frame.DecodeBodySlow(body)
	if err != nil || f.Kind != KindEvent {
		return txRec{}, false, err
	}
	return txRec{seq: f.Seq, key: w.keyOf(f.TransactionID), content: w.contentOf(f.ExecutionID, f.Payload)}, true, nil
}
