package localseg

import (
	"encoding/binary"
	"sort"
	"strings"
	"unsafe"
)

// The read index holds locations, never payloads (doc.go, Read index):
//
//   - per segment, the sequence of its first event and the byte offset of
//     every event frame, packed in 3 bytes each (segments are below 16 MiB;
//     a segment written by another writer that is larger switches to 4);
//   - per execution, its sequences as unsigned-varint deltas (about 2 bytes
//     an event when executions interleave), with an anchor every
//     anchorEvery entries so a page deep into a long execution does not
//     decode it from the start.
//
// Locating sequence s is a binary search over the segments and one slice
// access; a per-execution read never scans the log.

const anchorEvery = 128

type segIndex struct {
	id    uint64
	first uint64 // sequence of the first event indexed in this segment
	w     int    // bytes per offset: 3, or 4 for a segment of 16 MiB or more
	offs  []byte
	// plain: the replay that indexed every event here found no escape
	// in any of their fields, so a read locates the fields by the frame
	// layout without searching for backslashes. An event indexed any
	// other way (an append, recovery) clears it.
	plain bool
}

func (si *segIndex) n() int { return len(si.offs) / si.w }

func (si *segIndex) off(i int) int64 {
	b := si.offs[i*si.w:]
	v := int64(b[0]) | int64(b[1])<<8 | int64(b[2])<<16
	if si.w == 4 {
		v |= int64(b[3]) << 24
	}
	return v
}

func (si *segIndex) put(off int64) {
	if si.w == 3 && off >= 1<<24 {
		wide := make([]byte, 0, (si.n()+1)*4*5/4)
		for i := range si.n() {
			wide = binary.LittleEndian.AppendUint32(wide, uint32(si.off(i)))
		}
		si.offs, si.w = wide, 4
	}
	if si.w == 3 {
		si.offs = append(si.offs, byte(off), byte(off>>8), byte(off>>16))
	} else {
		si.offs = binary.LittleEndian.AppendUint32(si.offs, uint32(off))
	}
}

// trim gives back the slack of the offsets' growth.
func (si *segIndex) trim() {
	if cap(si.offs) > len(si.offs) {
		si.offs = append(make([]byte, 0, len(si.offs)), si.offs...)
	}
}

type execAnchor struct {
	prev uint64 // the sequence of entry idx-1 (0 before the first)
	pos  uint32 // byte offset of entry idx in data
	idx  uint32
}

type execList struct {
	data    []byte // uvarint deltas
	last    uint64
	n       int
	anchors []execAnchor
}

func (l *execList) add(seq uint64) {
	if l.n > 0 && l.n%anchorEvery == 0 {
		l.anchors = append(l.anchors, execAnchor{prev: l.last, pos: uint32(len(l.data)), idx: uint32(l.n)})
	}
	l.data = binary.AppendUvarint(l.data, seq-l.last)
	l.last = seq
	l.n++
}

// after returns up to limit sequences above from, and how many there are.
func (l *execList) after(from uint64, limit int) ([]uint64, uint64) {
	if l.last <= from {
		return nil, 0
	}
	pos, idx, cur := 0, 0, uint64(0)
	if a := sort.Search(len(l.anchors), func(i int) bool { return l.anchors[i].prev > from }) - 1; a >= 0 {
		pos, idx, cur = int(l.anchors[a].pos), int(l.anchors[a].idx), l.anchors[a].prev
	}
	for idx < l.n {
		d, k := binary.Uvarint(l.data[pos:])
		pos += k
		cur += d
		idx++
		if cur > from {
			break
		}
	}
	count := uint64(l.n - idx + 1)
	if limit <= 0 {
		return nil, count
	}
	out := make([]uint64, 0, min(uint64(limit), count))
	out = append(out, cur)
	for idx < l.n && len(out) < limit {
		d, k := binary.Uvarint(l.data[pos:])
		pos += k
		cur += d
		idx++
		out = append(out, cur)
	}
	return out, count
}

// all decodes every sequence (used when trimming).
func (l *execList) all() []uint64 {
	out := make([]uint64, 0, l.n)
	cur, pos := uint64(0), 0
	for range l.n {
		d, k := binary.Uvarint(l.data[pos:])
		pos += k
		cur += d
		out = append(out, cur)
	}
	return out
}

type index struct {
	segs   []segIndex
	execs  map[string]*execList
	events uint64
	// pending are the evicted segments a lazy build left unread, ascending
	// (lazyindex.go): none of their events is in segs or execs yet.
	pending []uint64
	// partial: the build left segments pending, so execs lacks their
	// events (also once they are resolved); a full build replaces it.
	partial bool
}

func newIndex() *index { return &index{execs: make(map[string]*execList)} }

func (x *index) segFor(id, seq uint64) *segIndex {
	if k := len(x.segs); k == 0 || x.segs[k-1].id != id {
		if k > 0 {
			x.segs[k-1].trim() // the previous segment is complete
		}
		x.segs = append(x.segs, segIndex{id: id, first: seq, w: 3})
	}
	return &x.segs[len(x.segs)-1]
}

// add indexes event seq, whose frame starts at off of segment id. Events
// arrive in sequence order.
func (x *index) add(id, seq uint64, off int64, exec string) {
	si := x.segFor(id, seq)
	si.put(off)
	si.plain = false // its payload may hold escapes
	l := x.execs[exec]
	if l == nil {
		l = &execList{}
		x.execs[strings.Clone(exec)] = l
	}
	l.add(seq)
	x.events++
}

// addBytes is add for an execution id held in a byte slice (the replay
// path); the map lookup does not allocate.
func (x *index) addBytes(id, seq uint64, off int64, exec []byte) {
	si := x.segFor(id, seq)
	si.put(off)
	si.plain = false // its payload may hold escapes
	l := x.execs[string(exec)]
	if l == nil {
		l = &execList{}
		x.execs[string(exec)] = l
	}
	l.add(seq)
	x.events++
}

// addPiece indexes the events of a scanned piece (see rebuild.go), which
// continue the indexed sequence.
func (x *index) addPiece(p *piece) {
	if k := len(x.segs); k > 0 && x.segs[k-1].id == p.id {
		// The rest of a segment indexed in part (a catch-up).
		si := &x.segs[k-1]
		for i := range p.n {
			si.put(p.offs.off(i))
		}
		si.plain = si.plain && p.offs.plain
	} else {
		if k > 0 {
			x.segs[k-1].trim()
		}
		si := p.offs
		si.first = p.first
		x.segs = append(x.segs, si)
	}
	x.events += uint64(p.n)
	lists := make([]*execList, len(p.nameEnds))
	start := uint32(0)
	for i, end := range p.nameEnds {
		exec := p.names[start:end]
		start = end
		l := x.execs[string(exec)]
		if l == nil {
			l = &execList{}
			x.execs[string(exec)] = l
		}
		lists[i] = l
	}
	for i, r := range p.refs {
		lists[r].add(p.first + uint64(i))
	}
}

// loc is where an event's frame is: at off of segment seg, ending at or
// before end (the next event's offset, or the segment's durable size).
type loc struct {
	seq   uint64
	seg   uint64
	off   int64
	end   int64
	plain bool // the segment's events have no escapes (segIndex.plain)
}

// locate finds seq. end is -1 when seq is the last event of its segment
// (the caller knows the segment's size).
func (x *index) locate(seq uint64) (loc, bool) {
	i := sort.Search(len(x.segs), func(i int) bool { return x.segs[i].first+uint64(x.segs[i].n()) > seq })
	if i == len(x.segs) || seq < x.segs[i].first {
		return loc{}, false
	}
	si := &x.segs[i]
	k := int(seq - si.first)
	l := loc{seq: seq, seg: si.id, off: si.off(k), end: -1, plain: si.plain}
	if k+1 < si.n() {
		l.end = si.off(k + 1)
	}
	return l, true
}

// trim drops everything at or below base from segments through seg.
func (x *index) trim(seg, base uint64) {
	k := 0
	for k < len(x.segs) && x.segs[k].id <= seg {
		x.events -= uint64(x.segs[k].n())
		k++
	}
	x.segs = append([]segIndex(nil), x.segs[k:]...)
	for len(x.pending) > 0 && x.pending[0] <= seg {
		x.pending = x.pending[1:]
	}
	for name, l := range x.execs {
		switch {
		case l.last <= base:
			delete(x.execs, name)
		case l.n > 0:
			first, _ := binary.Uvarint(l.data)
			if first > base {
				continue
			}
			nl := &execList{}
			for _, s := range l.all() {
				if s > base {
					nl.add(s)
				}
			}
			x.execs[name] = nl
		}
	}
}

// Estimated costs of the runtime's structures, for bytes(): a map slot of a
// string key and a pointer value (16+8 bytes and a control byte, at the
// swiss table's maximum load of 7/8), the allocation of an execList, and
// the rounding of small allocations to 8 bytes.
const (
	mapSlotBytes  = (16 + 8 + 1) * 8 / 7
	execListBytes = int64(unsafe.Sizeof(execList{}))
)

// bytes is the memory the index holds: the capacity of every slice, and an
// honest estimate of the map's own overhead.
func (x *index) bytes() int64 {
	n := int64(cap(x.segs)) * int64(unsafe.Sizeof(segIndex{}))
	for i := range x.segs {
		n += int64(cap(x.segs[i].offs))
	}
	for name, l := range x.execs {
		n += mapSlotBytes + (int64(len(name))+7)&^7 + execListBytes
		n += int64(cap(l.data)) + int64(cap(l.anchors))*int64(unsafe.Sizeof(execAnchor{}))
	}
	return n
}
