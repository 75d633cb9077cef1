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
// Memory: each entry is a 128-bit keyed hash of the transaction id (16
// bytes in a ring in sequence order) and a Go map entry (the key, the
// sequence and a 64-bit content hash, 32 bytes, plus the map's slack and
// the tombstones of evictions): about 120 bytes an entry measured, at most
// 160 (TestTxWindowMemoryPerEntry), whatever the ids' length; so a full
// default window costs about 12 MB a shard, and nothing is allocated up
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
type txWindow struct {
	max          int
	seedA, seedB maphash.Seed
	seedC        maphash.Seed
	ids          map[txKey]txEntry
	// ring holds the keys of sequences lo..lo+n-1 in order, the oldest at
	// head; it grows up to max.
	ring    []txKey
	head, n int
	lo      uint64
}

func newTxWindow(max int, readOnly bool) *txWindow {
	if max < 0 || readOnly {
		return nil
	}
	if max == 0 {
		max = DefaultTransactionWindow
	}
	return &txWindow{max: max, seedA: maphash.MakeSeed(), seedB: maphash.MakeSeed(), seedC: maphash.MakeSeed(), ids: make(map[txKey]txEntry)}
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
	e, ok := w.ids[v.key]
	return e, ok
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
		w.grow()
	}
	w.ring[(w.head+w.n)%len(w.ring)] = k
	w.n++
	// A newer event of an id replaces the older one (a log written
	// without de-duplication can hold an id twice).
	w.ids[k] = txEntry{seq: seq, content: content}
}

func (w *txWindow) grow() {
	nr := make([]txKey, min(max(2*len(w.ring), 64), w.max))
	for i := range w.n {
		nr[i] = w.ring[(w.head+i)%len(w.ring)]
	}
	w.ring, w.head = nr, 0
}

func (w *txWindow) evictOldest() {
	k := w.ring[w.head]
	if e, ok := w.ids[k]; ok && e.seq == w.lo {
		delete(w.ids, k)
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
	clear(w.ids)
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
		if buf, recs, err = s.txRecsOf(seg, buf); err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				return err
			}
			s.log.Warn("localseg: transaction window rebuilt only from the segments after a damaged one", "dir", s.dir, "segment", seg.id, "err", err)
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
		// Sized once: no growth steps while the entries go in.
		w.ids = make(map[txKey]txEntry, found-skip)
		w.ring = make([]txKey, found-skip)
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
	if f == nil {
		var err error
		if f, err = s.fs.OpenFile(s.segPath(seg.id), os.O_RDONLY, 0); err != nil {
			return buf, nil, fmt.Errorf("localseg: open segment %d: %w", seg.id, err)
		}
		defer f.Close()
	}
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
