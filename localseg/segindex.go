package localseg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Index files of sealed segments (seg-<id>.idx).
//
// A sealed segment never changes, so what the read index takes from it —
// the offset and execution of every event, and its consumer frames — is
// kept beside it and loaded instead of parsed at the next first read. The
// file is a cache with one trust rule: it records the length and the xxh64
// digest of the segment's bytes as they were when this package wrote them
// (durable, by its own encoder) or when a replay validated every frame of
// them (CRC, body, sequence), and it is used only when the segment, read in
// full, still has that length and digest. Then the bytes are the ones that
// were written or validated, so every frame in them is valid and the file
// says where each one is. A segment whose bytes changed in any way — a
// flipped bit, a torn or foreign write — hashes differently and is replayed
// frame by frame, so a bad frame is reported exactly as without the file:
// at the first read, naming segment and offset (docs/FORMAT.md §4.4). A missing, torn,
// stale or foreign file costs that full replay and nothing else; the file
// is never fsynced, and a read-only open never writes one.
//
// Layout (little-endian), then an xxh64 of everything before it:
//
//	 0 magic "BLIX"        4 version (1)
//	 8 segment id         16 segment length       24 segment xxh64
//	32 first sequence     40 offset of the first event
//	48 events n           52 consumer frames c    56 executions d
//	60 flags (bit 0: no escape in any event, segIndex.plain)
//	61 offset width (3 or 4)                      62 zero
//	64 n offsets of width bytes; n u32 execution indexes (each new one is
//	   the next of the d); d u16 execution id lengths; the ids; c consumer
//	   frames: kind u8, sequence u64, name length u16, name.

const (
	segIdxSuffix  = ".idx"
	segIdxMagic   = 0x58494c42 // "BLIX"
	segIdxVersion = 1
	segIdxHeader  = 64
	segIdxPlain   = 1
)

// SegmentIndexFileName is the file name of segment id's index file.
func SegmentIndexFileName(id uint64) string { return fmt.Sprintf("seg-%016d%s", id, segIdxSuffix) }

// parseSegmentIndexName returns the segment id of an index file name.
func parseSegmentIndexName(name string) (uint64, bool) {
	if len(name) < len(segIdxSuffix) || name[len(name)-len(segIdxSuffix):] != segIdxSuffix {
		return 0, false
	}
	return parseSegmentName(name[:len(name)-len(segIdxSuffix)] + segSuffix)
}

// encodeSegIndex encodes the piece of a whole sealed segment of length size
// whose bytes hash to digest.
func encodeSegIndex(p *piece, size int64, digest uint64) []byte {
	n, d := len(p.refs), len(p.nameEnds)
	total := segIdxHeader + len(p.offs.offs) + 4*n + 2*d + len(p.names) + 8
	for _, c := range p.cons {
		total += 11 + len(c.name)
	}
	b := make([]byte, segIdxHeader, total)
	le := binary.LittleEndian
	le.PutUint32(b[0:], segIdxMagic)
	le.PutUint32(b[4:], segIdxVersion)
	le.PutUint64(b[8:], p.id)
	le.PutUint64(b[16:], uint64(size))
	le.PutUint64(b[24:], digest)
	if p.n > 0 {
		le.PutUint64(b[32:], p.first)
		le.PutUint64(b[40:], uint64(p.firstOff))
	}
	le.PutUint32(b[48:], uint32(n))
	le.PutUint32(b[52:], uint32(len(p.cons)))
	le.PutUint32(b[56:], uint32(d))
	if p.offs.plain {
		b[60] = segIdxPlain
	}
	b[61] = byte(p.offs.w)
	b = append(b, p.offs.offs...)
	for _, r := range p.refs {
		b = le.AppendUint32(b, r)
	}
	start := uint32(0)
	for _, end := range p.nameEnds {
		b = le.AppendUint16(b, uint16(end-start))
		start = end
	}
	b = append(b, p.names...)
	for _, c := range p.cons {
		b = append(b, byte(c.kind))
		b = le.AppendUint64(b, c.seq)
		b = le.AppendUint16(b, uint16(len(c.name)))
		b = append(b, c.name...)
	}
	return le.AppendUint64(b, xxhash.Sum64(b))
}

var errSegIdx = errors.New("localseg: not a valid index file for this segment")

// decodeSegIndex decodes the index file b of segment id, whose length is
// size, into the piece a replay of the whole segment would produce, and the
// digest the segment's bytes must have. Anything inconsistent is an error;
// the caller then replays the segment.
func decodeSegIndex(b []byte, id uint64, size int64) (*piece, uint64, error) {
	le := binary.LittleEndian
	if len(b) < segIdxHeader+8 || le.Uint64(b[len(b)-8:]) != xxhash.Sum64(b[:len(b)-8]) {
		return nil, 0, errSegIdx
	}
	b = b[:len(b)-8]
	if le.Uint32(b[0:]) != segIdxMagic || le.Uint32(b[4:]) != segIdxVersion || le.Uint64(b[8:]) != id ||
		le.Uint64(b[16:]) != uint64(size) || b[60]&^segIdxPlain != 0 || b[62] != 0 || b[63] != 0 {
		return nil, 0, errSegIdx
	}
	w := int(b[61])
	n, c, d := int(le.Uint32(b[48:])), int(le.Uint32(b[52:])), int(le.Uint32(b[56:]))
	// Every event takes a frame of more than HeaderSize bytes: a count
	// the segment cannot hold is refused before anything is sized by it.
	if (w != 3 && w != 4) || int64(n) > size/HeaderSize || int64(c) > size/HeaderSize || d > n {
		return nil, 0, errSegIdx
	}
	p := &piece{id: id, n: n, offs: segIndex{id: id, w: w, plain: b[60]&segIdxPlain != 0}}
	if n > 0 {
		p.first, p.firstOff = le.Uint64(b[32:]), int64(le.Uint64(b[40:]))
		if p.first == 0 || p.first+uint64(n) < p.first {
			return nil, 0, errSegIdx
		}
	} else if le.Uint64(b[32:]) != 0 || le.Uint64(b[40:]) != 0 {
		return nil, 0, errSegIdx
	}
	rest := b[segIdxHeader:]
	if len(rest) < n*w+4*n+2*d {
		return nil, 0, errSegIdx
	}
	p.offs.offs = bytes.Clone(rest[:n*w])
	refs, lens := rest[n*w:n*w+4*n], rest[n*w+4*n:n*w+4*n+2*d]
	rest = rest[n*w+4*n+2*d:]
	prev := int64(-1)
	for i := range n {
		off := p.offs.off(i)
		if off <= prev || off+HeaderSize >= size || (i == 0 && off != p.firstOff) {
			return nil, 0, errSegIdx
		}
		prev = off
	}
	// Executions are numbered in order of first appearance, each used.
	p.refs = make([]uint32, n)
	next := uint32(0)
	for i := range n {
		r := le.Uint32(refs[4*i:])
		if r > next {
			return nil, 0, errSegIdx
		}
		if r == next {
			next++
		}
		p.refs[i] = r
	}
	if int(next) != d {
		return nil, 0, errSegIdx
	}
	p.nameEnds = make([]uint32, d)
	end := 0
	for i := range d {
		l := int(le.Uint16(lens[2*i:]))
		if l < 1 || l > MaxIDLen || end+l > len(rest) {
			return nil, 0, errSegIdx
		}
		end += l
		p.nameEnds[i] = uint32(end)
	}
	p.names = bytes.Clone(rest[:end])
	rest = rest[end:]
	p.cons = make([]consFrame, 0, c)
	for range c {
		if len(rest) < 11 {
			return nil, 0, errSegIdx
		}
		kind, seq, l := FrameKind(rest[0]), le.Uint64(rest[1:]), int(le.Uint16(rest[9:]))
		if kind < KindConsumerCreate || kind > KindConsumerDelete || (kind != KindAck && seq != 0) ||
			l < 1 || l > MaxIDLen || len(rest) < 11+l {
			return nil, 0, errSegIdx
		}
		p.cons = append(p.cons, consFrame{kind: kind, seq: seq, name: string(rest[11 : 11+l])})
		rest = rest[11+l:]
	}
	if len(rest) != 0 {
		return nil, 0, errSegIdx
	}
	return p, le.Uint64(b[24:]), nil
}

// segIdxBuilder accumulates the index file of the active segment as the
// writer makes its frames durable. It exists only for a segment this
// process wrote from its first byte, and only the holder of the writer
// role touches it.
type segIdxBuilder struct {
	h *xxhash.Digest
	p piece
	// size is the length of the bytes hashed so far.
	size int64
}

func newSegIdxBuilder(id uint64) *segIdxBuilder {
	return &segIdxBuilder{h: xxhash.New(), p: piece{id: id, offs: segIndex{id: id, w: 3, plain: true}}}
}

// add takes the frames of items, durable now, which buf[items[0].start:
// items[len-1].end] holds. It reports false when they do not continue the
// segment as the builder knows it (the builder is then dropped).
func (b *segIdxBuilder) add(buf []byte, items []item) bool {
	if len(items) == 0 {
		return true
	}
	if items[0].off != b.size {
		return false
	}
	data := buf[items[0].start:items[len(items)-1].end]
	b.h.Write(data)
	b.size += int64(len(data))
	p := &b.p
	for i := range items {
		it := &items[i]
		if it.kind != KindEvent {
			seq := uint64(0)
			if it.kind == KindAck {
				seq = it.seq
			}
			p.cons = append(p.cons, consFrame{kind: it.kind, name: it.name, seq: seq})
			continue
		}
		if p.n == 0 {
			p.first, p.firstOff = it.seq, it.off
		} else if it.seq != p.first+uint64(p.n) {
			return false
		}
		p.n++
		p.offs.put(it.off)
		addExec(p, it.name)
		// A scan records a body with an escape as not plain.
		if it.esc {
			p.offs.plain = false
		}
	}
	return true
}

// finish returns the index file of the segment sealed at length size, or
// nil when the builder does not cover exactly that.
func (b *segIdxBuilder) finish(size int64) []byte {
	if b == nil || b.size != size || size == 0 {
		return nil
	}
	return encodeSegIndex(&b.p, size, b.h.Sum64())
}

// segIdxFiles reads (and, for a writable store, writes) the index files of
// a store directory during a replay.
type segIdxFiles struct {
	fs     FS
	dir    string
	write  bool
	loaded *atomic.Int64 // segments taken from their index files
	// evicted reports the digest an evicted segment had when it left the
	// disk (evict.go): its index file is trusted when it records that.
	evicted func(id uint64) (size int64, digest uint64, ok bool)
	// lazy: an evicted segment without a valid index file is not fetched
	// but left pending (lazyindex.go), indexed on the first read of it.
	lazy bool
	// fromObject, when set, gives an evicted segment without a valid index
	// file its piece from the segment's index object (indexobj.go), and
	// the object's bytes, which a writable store keeps as the index file.
	fromObject func(rg segRange) (*piece, []byte, bool)
}

// IndexFileLoads reports how many sealed segments this store's replays took
// from their index files instead of parsing them (a diagnostic: 0 after a
// replay means every segment was read frame by frame).
func (s *Store) IndexFileLoads() int64 { return s.idxLoads.Load() }

// segIdxFiles is how the store's replays use index files.
func (s *Store) segIdxFiles() *segIdxFiles {
	return &segIdxFiles{fs: s.fs, dir: s.dir, write: !s.readOnly, loaded: &s.idxLoads, evicted: s.EvictedSegment,
		fromObject: func(rg segRange) (*piece, []byte, bool) { return s.indexObjectPiece(rg, s.fetchIndexObject) }}
}

// writeSegIndex writes an index file (no fsync: it is a cache). Errors are
// returned for the caller to ignore or log.
func writeSegIndex(fsys FS, dir string, id uint64, data []byte) error {
	f, err := fsys.OpenFile(filepath.Join(dir, SegmentIndexFileName(id)), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// skipSegmentDigest is set only by the RED control test: index files are
// then trusted without hashing their segments.
var skipSegmentDigest atomic.Bool

// maxSegIdxFile bounds what is read of an index file: far above what the
// largest segment's file holds.
const maxSegIdxFile = 64 << 20

// load returns the piece of sealed segment rg from its index file when the
// file is valid and the segment's bytes, read in full through buf, still
// hash to its digest.
func (x *segIdxFiles) load(open openSegFunc, rg segRange, buf []byte) (*piece, []byte, bool) {
	raw, err := readSegIdxFile(x.fs, x.dir, rg.id)
	if err != nil {
		return nil, buf, false
	}
	p, digest, err := decodeSegIndex(raw, rg.id, rg.to)
	if err != nil {
		return nil, buf, false
	}
	if skipSegmentDigest.Load() {
		return p, buf, true
	}
	if x.evicted != nil {
		// An evicted segment's bytes are checked against this digest
		// whenever they are fetched: the file is trusted without them.
		if size, d, ok := x.evicted(rg.id); ok {
			return p, buf, size == rg.to && d == digest
		}
	}
	sum, buf, err := hashSegment(open, rg, buf)
	if err != nil || sum != digest {
		return nil, buf, false
	}
	return p, buf, true
}

// readSegIdxFile reads segment id's index file, bounded by maxSegIdxFile.
func readSegIdxFile(fsys FS, dir string, id uint64) ([]byte, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, SegmentIndexFileName(id)), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxSegIdxFile || st.Size() < segIdxHeader+8 {
		return nil, errSegIdx
	}
	raw := make([]byte, st.Size())
	if err := readFull(f, raw, 0); err != nil {
		return nil, err
	}
	return raw, nil
}

// hashSegment returns the xxh64 of rg's bytes, read through buf.
func hashSegment(open openSegFunc, rg segRange, buf []byte) (uint64, []byte, error) {
	r, done, err := open(rg.id)
	if err != nil {
		return 0, buf, err
	}
	defer done()
	if len(buf) < scanChunk {
		buf = make([]byte, scanChunk)
	}
	h := xxhash.New()
	for pos := rg.from; pos < rg.to; {
		data := buf[:min(int64(len(buf)), rg.to-pos)]
		if err := readFull(r, data, pos); err != nil {
			return 0, buf, err
		}
		h.Write(data)
		pos += int64(len(data))
	}
	return h.Sum64(), buf, nil
}

// scan is scanRange for a replay that may use index files: a whole sealed
// segment comes from its index file when that is valid for its bytes, and
// one replayed in full without error gets a new index file when the store
// is writable.
func (x *segIdxFiles) scan(open openSegFunc, rg segRange, buf []byte) (*piece, []byte) {
	if x == nil || !rg.sealed || rg.from != 0 || rg.to <= 0 {
		return scanRange(open, rg, buf, nil)
	}
	p, buf, ok := x.load(open, rg, buf)
	if ok {
		x.loaded.Add(1)
		return p, buf
	}
	if x.lazy && x.evicted != nil {
		if _, _, ev := x.evicted(rg.id); ev {
			return &piece{id: rg.id, pending: true}, buf
		}
	}
	if x.fromObject != nil {
		if p, raw, ok := x.fromObject(rg); ok {
			if x.write {
				_ = writeSegIndex(x.fs, x.dir, rg.id, raw) // a cache, as below
			}
			return p, buf
		}
	}
	if !x.write {
		return scanRange(open, rg, buf, nil)
	}
	h := xxhash.New()
	p, buf = scanRange(open, rg, buf, h)
	if p.err == nil {
		// A cache: a failure to write it only costs the next replay.
		_ = writeSegIndex(x.fs, x.dir, rg.id, encodeSegIndex(p, rg.to, h.Sum64()))
	}
	return p, buf
}

// removeSegIndex removes segment id's index file, if any.
func removeSegIndex(fsys FS, dir string, id uint64) error {
	err := fsys.Remove(filepath.Join(dir, SegmentIndexFileName(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
