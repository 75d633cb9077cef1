package localseg

import (
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/frame"
)

// probeFirstEvent returns the sequence of the first event among the frames
// in [0, size) of segment id (0 when there is none), reading only as far as
// it needs to.
func probeFirstEvent(f File, id uint64, size int64) (uint64, error) {
	const chunk = 64 << 10
	var buf []byte
	var at int64 // file offset of buf[0]
	read := func(o, n int64) error {
		buf, at = make([]byte, n), o
		if err := readFull(f, buf, o); err != nil {
			return fmt.Errorf("localseg: read segment %d: %w", id, err)
		}
		return nil
	}
	for o := int64(0); o < size; {
		rel := o - at
		if buf == nil || rel+HeaderSize > int64(len(buf)) {
			if size-o < HeaderSize {
				return 0, &CorruptionError{Segment: id, Offset: o, Err: frame.ErrShortHeader}
			}
			if err := read(o, min(size-o, chunk)); err != nil {
				return 0, err
			}
			continue
		}
		need := HeaderSize + int64(le32(buf[rel+4:]))
		if need > MaxBodyLen+HeaderSize || o+need > size {
			_, _, err := frame.At(buf[rel:rel+HeaderSize], 0)
			if err == nil || errors.Is(err, frame.ErrShortBody) {
				err = frame.ErrShortBody
			}
			return 0, &CorruptionError{Segment: id, Offset: o, Err: err}
		}
		if rel+need > int64(len(buf)) {
			if err := read(o, min(size-o, max(need, chunk))); err != nil {
				return 0, err
			}
			continue
		}
		n, body, err := frame.At(buf, int(rel))
		if err != nil {
			return 0, &CorruptionError{Segment: id, Offset: o, Err: err}
		}
		if v, ok := frame.ParseFast(body); ok {
			if v.Kind == KindEvent {
				return v.Seq, nil
			}
		} else if fr, err := frame.DecodeBodySlow(body); err != nil {
			return 0, &CorruptionError{Segment: id, Offset: o, Err: err}
		} else if fr.Kind == KindEvent {
			return fr.Seq, nil
		}
		o += int64(n)
	}
	return 0, nil
}

// lastNonZeroAt returns the file offset of the last non-zero byte in
// [from, to) of f, or -1, reading backwards in bounded chunks.
func lastNonZeroAt(f File, id uint64, from, to int64) (int64, error) {
	buf := make([]byte, min(to-from, 1<<20))
	for end := to; end > from; {
		start := max(from, end-int64(len(buf)))
		b := buf[:end-start]
		if err := readFull(f, b, start); err != nil {
			return 0, fmt.Errorf("localseg: read segment %d: %w", id, err)
		}
		if k := lastNonZero(b); k >= 0 {
			return start + int64(k), nil
		}
		end = start
	}
	return -1, nil
}
