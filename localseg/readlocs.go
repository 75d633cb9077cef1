package localseg

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/bucketlog/bucketlog/frame"
)

// Reading located events: runs of adjacent frames read at once, in
// parallel parts for a large page, decoded into records that share one
// string per run.

// maxReadSpan bounds one read of adjacent frames.
const maxReadSpan = 256 << 10

// parallelReadMin is the size of a read above which readLocs splits it
// among goroutines: each run is read, CRC-checked and parsed on its own, so
// a large page takes the time of its share.
const parallelReadMin = 512 << 10

// readLocs reads the events at locs, coalescing adjacent frames of one
// segment into one read; a large read is split among up to GOMAXPROCS
// goroutines (the first error in record order is returned).
func (s *Store) readLocs(locs []loc) ([]Record, error) { return s.readLocsHeld(locs, nil) }

// readLocsHeld is readLocs reading the segments in hold from there. A
// corrupt local sealed segment is healed from the bucket and read again
// (heal.go).
func (s *Store) readLocsHeld(locs []loc, hold pageHold) (out []Record, err error) {
	err = s.healing(func() (err error) {
		out, err = s.readLocsOnce(locs, hold)
		return err
	})
	return out, err
}

func (s *Store) readLocsOnce(locs []loc, hold pageHold) ([]Record, error) {
	out := make([]Record, len(locs))
	var total int64
	for i := range locs {
		total += locs[i].end - locs[i].off
	}
	parts := int(min(int64(runtime.GOMAXPROCS(0)), total/(parallelReadMin/2), maxReplayWorkers))
	if parts <= 1 {
		return out, s.readLocsInto(locs, out, hold)
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := k*len(locs)/parts, (k+1)*len(locs)/parts
		wg.Go(func() { errs[k] = s.readLocsInto(locs[lo:hi], out[lo:hi], hold) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readScratch holds the buffers that runs of frames are read into before
// they are copied into the string their records share.
var readScratch = sync.Pool{New: func() any { return new([]byte) }}

// readLocsInto reads the events at locs into out (of the same length),
// the segments in hold from there.
func (s *Store) readLocsInto(locs []loc, out []Record, hold pageHold) error {
	sp := readScratch.Get().(*[]byte)
	scratch := *sp
	// The segment being read stays open (held) across its runs: one
	// lookup a segment, and an evicted one's fetched copy cannot leave the
	// cache between two runs of the same page.
	var held *rfile
	defer func() {
		*sp = scratch[:0]
		readScratch.Put(sp)
		if held != nil {
			s.readers.put(held)
		}
	}()
	open := func(id uint64) (*rfile, error) {
		if held != nil && held.id == id {
			return held, nil
		}
		if held != nil {
			s.readers.put(held)
			held = nil
		}
		if m, ok := hold[id]; ok {
			held = &rfile{id: id, f: m, refs: 1, dead: true}
			return held, nil
		}
		r, err := s.readers.get(id)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, err
			}
			return nil, s.readErr(id, err)
		}
		held = r
		return r, nil
	}
	for i := 0; i < len(locs); {
		start, end := locs[i].off, locs[i].end
		j := i + 1
		for j < len(locs) && locs[j].seg == locs[i].seg && locs[j].off == locs[j-1].end && locs[j].end-start <= maxReadSpan {
			end = locs[j].end
			j++
		}
		r, err := open(locs[i].seg)
		if err != nil {
			return err
		}
		if end-start > maxReadSpan {
			// One location whose span holds more than its frame (a
			// large frame, or consumer frames after it): read its
			// header to know its length.
			var hdr [HeaderSize]byte
			if err := readFull(r.f, hdr[:], start); err != nil {
				return fmt.Errorf("localseg: read segment %d at %d: %w", locs[i].seg, start, err)
			}
			n := int64(le32(hdr[4:]))
			if le32(hdr[:]) != FrameMagic || n > MaxBodyLen || start+HeaderSize+n > end {
				return &CorruptionError{Segment: locs[i].seg, Offset: start, Err: frame.ErrBadMagic}
			}
			end = start + HeaderSize + n
		}
		// The run is read into a reused scratch buffer (warm in the
		// cache, never zeroed again) and checked there; the records'
		// fields are substrings of one string copied from it (one
		// allocation and one copy a run, not three allocations a record,
		// and no clearing of fresh memory that the read overwrites).
		buf, verified, err := readRange(r, locs[i].seg, scratch[:0], start, end)
		if !verified && cap(buf) <= maxReadSpan {
			scratch = buf[:0]
		}
		if err != nil {
			return s.readErr(locs[i].seg, err)
		}
		page := string(buf)
		for k := i; k < j; k++ {
			if err := decodeRecord(&out[k], buf, page, int(locs[k].off-start), &locs[k], verified); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// decodeRecord decodes the event frame at b[o:], which the index says is
// event l.seq, into rec; page is string(b). It writes rec in place (a
// record is too large to return and copy a million times cheaply).
// verified bytes had every frame's CRC checked already (readRange).
func decodeRecord(rec *Record, b []byte, page string, o int, l *loc, verified bool) error {
	at := frame.At
	if verified {
		at = frame.AtUnchecked
	}
	_, body, err := at(b, o)
	if err != nil {
		return &CorruptionError{Segment: l.seg, Offset: l.off, Err: err}
	}
	// Every indexed frame was validated by the replay that indexed it (or
	// written by this package's encoder) and its CRC still matches: only
	// locate its strings (by the layout alone when the replay found no
	// escape in the segment).
	var v frame.View
	ok := false
	if l.plain {
		ok = frame.ParseEventPlain(body, &v)
	}
	if !ok {
		v, ok = frame.ParseTrusted(body)
	}
	seq := uint64(0) // not an event: reported below
	if ok && v.Kind == KindEvent {
		at := o + HeaderSize
		field := func(sp frame.Span) string {
			if sp.Esc {
				return frame.Unescape(body[sp.Lo:sp.Hi])
			}
			return page[at+int(sp.Lo) : at+int(sp.Hi)]
		}
		seq = v.Seq
		rec.Seq, rec.ExecutionID, rec.TransactionID, rec.Payload = v.Seq, field(v.Exec), field(v.Txn), field(v.Payload)
	} else {
		f, err := frame.DecodeBody(body)
		if err != nil {
			return &CorruptionError{Segment: l.seg, Offset: l.off, Err: err}
		}
		if f.Kind == KindEvent {
			seq = f.Seq
			*rec = Record{Seq: f.Seq, ExecutionID: f.ExecutionID, TransactionID: f.TransactionID, Payload: f.Payload}
		}
	}
	if seq != l.seq {
		*rec = Record{}
		return &CorruptionError{Segment: l.seg, Offset: l.off,
			Err: fmt.Errorf("%w: the index locates event %d here, found another frame (sequence %d)", ErrCorrupt, l.seq, seq)}
	}
	return nil
}

// readRange reads [from, to) of r, segment id, into buf (grown as
// needed). verified reports bytes of an evicted segment's fetched copy
// (remote.go: every frame's CRC checked at the fetch): they alias that
// copy, are never written, and must not be written or reused as a buffer.
func readRange(r *rfile, id uint64, buf []byte, from, to int64) (_ []byte, verified bool, _ error) {
	if m, ok := r.f.(memFile); ok && 0 <= from && from <= to && to <= int64(len(m)) {
		return m[from:to:to], true, nil
	}
	b, err := readSeg(r.f, id, buf, from, to)
	return b, false, err
}
