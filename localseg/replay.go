package localseg

import (
	"fmt"

	"github.com/bucketlog/bucketlog/frame"
)

// replay rebuilds the store's state from frames: the tip (gapless from the
// reclaim base), consumers, and optionally the read index.
type replay struct {
	tip    uint64
	cons   map[string]uint64
	idx    *index // nil: locations are not needed
	first  uint64 // first event of the segment being walked
	frames int64
	// unknown: the last piece stitched was a pending segment, so the
	// tip is not known (rebuild.go, stitch).
	unknown bool
	// pended: some piece was pending; its consumer frames are unknown.
	pended bool
	// imported: the segments whose consumer frames are not applied
	// (imported.go); nil: none.
	imported map[uint64]bool
}

// bodyFields validates and parses a frame body: its kind and sequence, and
// the execution id of an event or the consumer of a consumer frame. fast
// reports the layout this package's encoder writes, whose spans v also
// holds; other valid layouts take the general decoder.
func bodyFields(body []byte) (v frame.View, exec, consumer []byte, fast bool, err error) {
	if v, fast = frame.ParseFast(body); fast {
		if v.Kind == KindEvent {
			return v, spanBytes(body, v.Exec), nil, true, nil
		}
		return v, nil, spanBytes(body, v.Consumer), true, nil
	}
	f, err := frame.DecodeBodySlow(body)
	if err != nil {
		return frame.View{}, nil, nil, false, err
	}
	v.Kind, v.Seq = f.Kind, f.Seq
	return v, []byte(f.ExecutionID), []byte(f.Consumer), false, nil
}

// apply applies the valid frame body found at off of segment id.
func (r *replay) apply(id uint64, off int64, body []byte) error {
	v, exec, consumer, _, err := bodyFields(body)
	if err != nil {
		return err
	}
	if v.Kind != KindEvent && r.imported[id] {
		r.frames++ // imported.go: the checkpoint stands for it
		return nil
	}
	switch v.Kind {
	case KindEvent:
		if v.Seq != r.tip+1 {
			return fmt.Errorf("%w: expected %d, found %d", frame.ErrSeqGap, r.tip+1, v.Seq)
		}
		r.tip = v.Seq
		if r.first == 0 {
			r.first = v.Seq
		}
		if r.idx != nil {
			r.idx.addBytes(id, v.Seq, off, exec)
		}
	case KindConsumerCreate:
		if _, ok := r.cons[string(consumer)]; !ok {
			r.cons[string(consumer)] = 0
		}
	case KindAck:
		// An Ack also (re-)establishes its consumer: reclaim writes Acks
		// forward so consumers outlive the segments that created them.
		if cur, ok := r.cons[string(consumer)]; !ok || v.Seq > cur {
			r.cons[string(consumer)] = v.Seq
		}
	case KindConsumerDelete:
		delete(r.cons, string(consumer))
	}
	r.frames++
	return nil
}

func spanBytes(body []byte, sp frame.Span) []byte {
	if sp.Esc {
		return []byte(frame.Unescape(body[sp.Lo:sp.Hi]))
	}
	return body[sp.Lo:sp.Hi]
}

// walkTail replays the highest segment, whose bytes [base, EOF) are data,
// and returns its logical end: the end of data, or where a torn tail starts
// (docs/FORMAT.md §4.4). ckLen is the active_len of a checkpoint that names
// this segment (-1 without one): bytes before it were fsynced, so nothing
// there can be torn.
func (r *replay) walkTail(id uint64, data []byte, base, ckLen int64) (int64, error) {
	for o := 0; o < len(data); {
		n, body, err := frame.At(data, o)
		if err == nil {
			if aerr := r.apply(id, base+int64(o), body); aerr != nil {
				// A whole frame (its CRC matched): never a torn write.
				return 0, &CorruptionError{Segment: id, Offset: base + int64(o), Err: aerr}
			}
			o += n
			continue
		}
		if !isTornTail(data, o, base, ckLen) {
			return 0, &CorruptionError{Segment: id, Offset: base + int64(o), Err: err}
		}
		return base + int64(o), nil
	}
	return base + int64(len(data)), nil
}
