package localseg

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/bucketlog/bucketlog/frame"
	"github.com/cespare/xxhash/v2"
)

// Replay of whole ranges of segments, in parallel.
//
// Every frame of a sealed segment (and of the durable part of the active
// one) must be valid, and what one segment holds does not depend on the
// others except through the sequence, so the ranges are scanned
// independently — each by one worker: read in cache-sized chunks, every
// CRC checked, every body parsed, event sequences checked to run without a
// gap inside the range — into pieces that the caller's goroutine then
// stitches in log order: the first event of each piece must continue the
// tip, consumer frames take effect in order, and the locations and
// execution lists join the index. The first error in log order wins,
// exactly as a serial replay would report it. Workers run at most
// replayWindow pieces ahead of the stitching, so memory stays bounded
// whatever the log's length.

// scanChunk is how much of a segment one read brings in: small enough that
// the bytes are still in the CPU cache when their frames are checked and
// parsed, large enough that the reads cost little.
const scanChunk = 256 << 10

// maxReplayWorkers bounds the scanning goroutines (GOMAXPROCS bounds them
// first).
const maxReplayWorkers = 8

// segRange is the bytes [from, to) of segment id.
type segRange struct {
	id       uint64
	from, to int64
	sealed   bool // the segment has a successor: its bytes never change
}

// openSegFunc opens segment id for reading; done releases it.
type openSegFunc func(id uint64) (r io.ReaderAt, done func(), err error)

// consFrame is a consumer frame found by a scan.
type consFrame struct {
	kind FrameKind
	name string
	seq  uint64
}

// piece is what the scan of one range found, up to its first invalid
// frame (err; everything before it is in the piece).
type piece struct {
	id       uint64
	first    uint64 // sequence of the first event; meaningful when n > 0
	firstOff int64  // its offset
	n        int    // events
	offs     segIndex
	// The executions of the events: names holds each distinct id once
	// (in order of first appearance), nameEnds the end of each in names,
	// and refs the index of each event's execution, so the stitching
	// looks an execution up once per piece, not once per event.
	names    []byte
	nameEnds []uint32
	refs     []uint32
	seen     map[string]uint32 // names while the piece is built
	cons     []consFrame
	err      error
	// pending: an evicted segment left unread (segIdxFiles.lazy): its
	// events and consumer frames are not known to this replay.
	pending bool
}

func (p *piece) fail(off int64, err error) {
	p.err = &CorruptionError{Segment: p.id, Offset: off, Err: err}
}

// add takes the valid frame body found at off.
func (p *piece) add(body []byte, off int64) error {
	v, exec, consumer, fast, err := bodyFields(body)
	if err != nil {
		return err
	}
	// A body laid out by another writer, or with an escape, cannot be
	// read by the layout alone.
	if v.Kind == KindEvent && (!fast || v.Exec.Esc || v.Txn.Esc || v.Payload.Esc) {
		p.offs.plain = false
	}
	if v.Kind != KindEvent {
		p.cons = append(p.cons, consFrame{kind: v.Kind, name: string(consumer), seq: v.Seq})
		return nil
	}
	if p.n > 0 && v.Seq != p.first+uint64(p.n) {
		return fmt.Errorf("%w: expected %d, found %d", frame.ErrSeqGap, p.first+uint64(p.n), v.Seq)
	}
	if p.n == 0 {
		p.first, p.firstOff = v.Seq, off
	}
	p.n++
	p.offs.put(off)
	addExec(p, exec)
	return nil
}

// addExec records the execution of the piece's next event.
func addExec[T string | []byte](p *piece, exec T) {
	r, ok := p.seen[string(exec)]
	if !ok {
		if p.seen == nil {
			p.seen = make(map[string]uint32)
		}
		r = uint32(len(p.nameEnds))
		p.names = append(p.names, exec...)
		p.nameEnds = append(p.nameEnds, uint32(len(p.names)))
		p.seen[string(exec)] = r
	}
	p.refs = append(p.refs, r)
}

// reserve sizes the piece's slices for all of rg from what its first
// scanned bytes held: growing them by doubling instead cost a fifth of the
// replay's parsing time in copies. The estimate is only a capacity (slack
// of 1/8); a range that holds more still grows.
func (p *piece) reserve(rg segRange, scanned int) {
	if p.n == 0 || scanned <= 0 {
		return
	}
	scale := func(v int) int {
		est := int64(v) * (rg.to - rg.from) / int64(scanned)
		return int(est + est/8 + 16)
	}
	p.refs = slices.Grow(p.refs, scale(p.n)-len(p.refs))
	p.offs.offs = slices.Grow(p.offs.offs, scale(len(p.offs.offs))-len(p.offs.offs))
}

// scanRange scans rg into a piece, reading through buf (grown when one
// frame does not fit; the possibly new buffer is returned for reuse). When
// h is not nil it also hashes the bytes scanned (all of rg when the piece
// has no error).
func scanRange(open openSegFunc, rg segRange, buf []byte, h *xxhash.Digest) (*piece, []byte) {
	p := &piece{id: rg.id, offs: segIndex{id: rg.id, w: 3, plain: true}}
	if rg.to-rg.from > maxSegmentFile {
		p.fail(rg.from, fmt.Errorf("%w: segment file of %d bytes is larger than any writer produces", ErrCorrupt, rg.to))
		return p, buf
	}
	if rg.to <= rg.from {
		return p, buf
	}
	f, done, err := open(rg.id)
	if err != nil {
		p.err = fmt.Errorf("localseg: open segment %d: %w", rg.id, err)
		return p, buf
	}
	defer done()
	if len(buf) < scanChunk {
		buf = make([]byte, scanChunk)
	}
	for pos := rg.from; pos < rg.to; {
		data := buf[:min(int64(len(buf)), rg.to-pos)]
		if err := readFull(f, data, pos); err != nil {
			p.err = fmt.Errorf("localseg: read segment %d: %w", rg.id, err)
			return p, buf
		}
		last := pos+int64(len(data)) == rg.to
		o := 0
		for o < len(data) {
			n, body, err := frame.At(data, o)
			if err == nil {
				err = p.add(body, pos+int64(o))
			} else if !last && (err == frame.ErrShortHeader || err == frame.ErrShortBody) {
				break // the frame continues past this chunk
			}
			if err != nil {
				p.fail(pos+int64(o), err)
				return p, buf
			}
			o += n
		}
		if o == 0 {
			// One frame larger than the buffer (its length is below the
			// cap, or frame.At would have refused it): make room for it.
			buf = make([]byte, HeaderSize+int(le32(data[4:])))
			continue
		}
		if pos == rg.from && pos+int64(o) < rg.to {
			p.reserve(rg, o)
		}
		if h != nil {
			h.Write(data[:o])
		}
		pos += int64(o)
	}
	p.offs.trim()
	p.seen = nil
	return p, buf
}

// stitch joins p, the next range in log order, to the replay. It returns
// the first error in log order: a sequence gap at the piece's first event,
// or the piece's own (which lies after all of its events).
func (r *replay) stitch(p *piece) error {
	if p.pending {
		// Its events are not known: the next event must only lie above
		// the tip (lazyindex.go checks each pending segment when read).
		r.unknown, r.pended = true, true
		if r.idx != nil {
			r.idx.pending = append(r.idx.pending, p.id)
			r.idx.partial = true
		}
		return nil
	}
	if p.n > 0 && (p.first <= r.tip || (p.first != r.tip+1 && !r.unknown)) {
		return &CorruptionError{Segment: p.id, Offset: p.firstOff, Err: fmt.Errorf("%w: expected %d, found %d", frame.ErrSeqGap, r.tip+1, p.first)}
	}
	if p.n > 0 {
		r.unknown = false
		r.tip = p.first + uint64(p.n) - 1
		if r.idx != nil {
			r.idx.addPiece(p)
		}
	}
	for _, c := range p.cons {
		if r.imported[p.id] {
			break // imported.go: the checkpoint stands for them
		}
		switch c.kind {
		case KindConsumerCreate:
			if _, ok := r.cons[c.name]; !ok {
				r.cons[c.name] = 0
			}
		case KindAck:
			// An Ack also (re-)establishes its consumer (see apply).
			if cur, ok := r.cons[c.name]; !ok || c.seq > cur {
				r.cons[c.name] = c.seq
			}
		case KindConsumerDelete:
			delete(r.cons, c.name)
		}
	}
	return p.err
}

// replayRanges replays rgs in log order into r, scanning several at once
// when there are several and more than one CPU. first is called with each
// range's first event (for ranges that hold one) once it is stitched. It
// returns the first error in log order and waits for its workers before
// returning.
//
// ix, when not nil, supplies whole sealed segments from their index files
// (segindex.go).
func (r *replay) replayRanges(open openSegFunc, ix *segIdxFiles, rgs []segRange, first func(id, seq uint64)) error {
	stitch := func(p *piece) error {
		if err := r.stitch(p); err != nil {
			return err
		}
		if p.n > 0 && first != nil {
			first(p.id, p.first)
		}
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), len(rgs), maxReplayWorkers)
	if workers <= 1 {
		var buf []byte
		for _, rg := range rgs {
			var p *piece
			p, buf = ix.scan(open, rg, buf)
			if err := stitch(p); err != nil {
				return err
			}
		}
		return nil
	}
	window := make(chan struct{}, 2*workers) // pieces scanned but not yet stitched
	quit := make(chan struct{})
	results := make([]chan *piece, len(rgs))
	for i := range results {
		results[i] = make(chan *piece, 1)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var buf []byte
			for {
				select {
				case window <- struct{}{}:
				case <-quit:
					return
				}
				i := int(next.Add(1) - 1)
				if i >= len(rgs) {
					return
				}
				var p *piece
				p, buf = ix.scan(open, rgs[i], buf)
				results[i] <- p
			}
		})
	}
	var err error
	for i := range rgs {
		p := <-results[i]
		<-window
		if err = stitch(p); err != nil {
			break
		}
	}
	close(quit)
	wg.Wait()
	return err
}
