package coldload

import (
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// decoded is one frame of a tail object with its exact bytes.
type decoded struct {
	f   frame.Frame
	raw []byte
}

// decodeTail decodes and verifies a tail object: every frame's magic, CRC
// and JSON (frame.Decode), Event sequences consecutive, and the
// first and last Event equal to the key's sequences. It is the single
// verification pass over a tail object's frames.
func decodeTail(t tailObj, data []byte) ([]decoded, error) {
	out := make([]decoded, 0, t.last-t.first+1)
	expect := t.first
	for off := 0; off < len(data); {
		f, n, err := frame.Decode(data[off:])
		if err != nil {
			return nil, &ObjectError{Key: t.key, Err: frameErr(off, err)}
		}
		if n <= 0 || n > len(data)-off {
			return nil, &ObjectError{Key: t.key, Err: corruptf("frame at offset %d has length %d", off, n)}
		}
		if f.Kind == frame.KindEvent {
			if f.Seq != expect {
				return nil, &ObjectError{Key: t.key, Err: corruptf("event sequence %d at offset %d, expected %d", f.Seq, off, expect)}
			}
			expect++
		}
		out = append(out, decoded{f: f, raw: data[off : off+n]})
		off += n
	}
	if expect == t.first {
		return nil, &ObjectError{Key: t.key, Err: corruptf("holds no event; the key says %d..%d", t.first, t.last)}
	}
	if expect-1 != t.last {
		return nil, &ObjectError{Key: t.key, Err: corruptf("holds events %d..%d; the key says %d..%d", t.first, expect-1, t.first, t.last)}
	}
	return out, nil
}

// frameErr makes a frame decoding error name its offset and match
// localseg.ErrCorrupt (a short buffer is corruption inside an object: a
// write-once object never ends in a torn frame).
func frameErr(off int, err error) error {
	if !errors.Is(err, localseg.ErrCorrupt) {
		err = fmt.Errorf("%w: %w", localseg.ErrCorrupt, err)
	}
	return fmt.Errorf("frame at offset %d: %w", off, err)
}

// eventIndex locates the Event frames of a verified segment image: the
// result's element i is the byte range of the frame of sequence first+i.
// Only a segment that a tail object overlaps pays for it.
func eventIndex(data []byte, first uint64, events int) ([][2]int, error) {
	idx := make([][2]int, 0, events)
	for off := 0; off < len(data); {
		f, n, err := frame.Decode(data[off:])
		if err != nil {
			return nil, frameErr(off, err)
		}
		if n <= 0 || n > len(data)-off {
			return nil, corruptf("frame at offset %d has length %d", off, n)
		}
		if f.Kind == frame.KindEvent {
			if f.Seq != first+uint64(len(idx)) {
				return nil, corruptf("event sequence %d at offset %d, expected %d", f.Seq, off, first+uint64(len(idx)))
			}
			idx = append(idx, [2]int{off, off + n})
		}
		off += n
	}
	return idx, nil
}
