package localseg

import (
	"bytes"
	"errors"

	"github.com/bucketlog/bucketlog/frame"
)

var magicBytes = []byte{0x01, 0x00, 0xdb, 0xe5}

const sectorSize = 512

// isTornTail decides whether the invalid bytes at data[o] (file offset
// base+o of the highest segment) are a torn tail, which recovery drops, or
// corruption, which it refuses to repair. The crash model: bytes covered by
// a completed fsync are intact; an interrupted write leaves each of its
// sectors either written or as before (zeros, since the store never writes
// over anything but zeros or identical bytes), and a file whose size change
// was not synced may end early. Hence, from position p = o on:
//
//   - fewer than 12 bytes left, or a zero header: the end of what was
//     written (nothing after a zero header can have been acknowledged:
//     an acknowledged frame's fsync covered every byte before it);
//   - a header whose body runs past the end of the file (or over the cap):
//     torn, unless a valid frame starts anywhere after p, which proves the
//     length field itself is damaged;
//   - a frame failing its CRC (or with an empty body, or a magic whose bytes
//     are each right or zero) with an all-zero 512-byte sector inside its
//     extent: a lost sector, so no fsync covered it and nothing after it
//     was acknowledged: torn, unless a valid frame starts inside the extent
//     (a damaged length that swallowed its successor);
//   - such a frame with zero bytes in its body (a valid body never holds
//     one), a zeroed magic byte or an empty body, or starting at or after
//     the trusted checkpoint's active_len: torn only if everything after it
//     is torn too (it is the last frame);
//   - a whole frame but for the head of its magic, lost with the sector
//     before a boundary inside the magic: torn (lostSectorHead);
//   - a valid frame, or bytes no torn write produces: not torn.
//
// Everything before ckLen was fsynced and is never torn.
func isTornTail(data []byte, o int, base, ckLen int64) bool {
	if base+int64(o) < ckLen {
		return false
	}
	trusted := ckLen >= 0
	for p := o; ; {
		n, body, err := frame.At(data, p)
		switch {
		case err == nil:
			return false
		case errors.Is(err, frame.ErrShortHeader), errors.Is(err, frame.ErrZeroHeader):
			return true
		case errors.Is(err, frame.ErrBodyTooLong), errors.Is(err, frame.ErrShortBody):
			return !validFrameIn(data, p+1, len(data))
		case errors.Is(err, frame.ErrBadMagic):
			if !magicTornLike(data[p : p+4]) {
				return false
			}
			if lostSectorHead(data, base, p) {
				return true
			}
			bl := int64(le32(data[p+4:]))
			if bl > MaxBodyLen || bl > int64(len(data)-p-HeaderSize) {
				return !validFrameIn(data, p+1, len(data))
			}
			n = HeaderSize + int(bl)
			body = data[p+HeaderSize : p+n]
		}
		// A frame whose header claims [p, p+n) but whose content does
		// not check out.
		end := p + n
		if zeroSectorIn(data, base, p, end) {
			return !validFrameIn(data, p+1, end)
		}
		weak := bytes.IndexByte(body, 0) >= 0 || !bytes.Equal(data[p:p+4], magicBytes) || len(body) == 0
		if !weak && !trusted {
			return false
		}
		p = end
	}
}

// magicTornLike reports whether each byte of a (wrong) magic is either the
// right byte or zero, as a sector lost in the middle of a header leaves it.
func magicTornLike(m []byte) bool {
	for i, c := range m {
		if c != 0 && c != magicBytes[i] {
			return false
		}
	}
	return true
}

// zeroSectorIn reports whether an all-zero 512-byte sector (aligned in the
// file; at the end of the file it may be shorter) lies inside [p, end) of
// data, which starts at file offset base.
func zeroSectorIn(data []byte, base int64, p, end int) bool {
	abs := base + int64(p)
	s := (abs + sectorSize - 1) / sectorSize * sectorSize
	for ; s < base+int64(end); s += sectorSize {
		lo := int(s - base)
		hi := min(lo+sectorSize, len(data))
		if hi > end && hi != len(data) {
			break // the sector reaches beyond the frame
		}
		if hi > lo && isAllZero(data[lo:hi]) {
			return true
		}
	}
	return false
}

// validFrameIn reports whether a frame with a matching CRC starts anywhere
// in data[from:to).
func validFrameIn(data []byte, from, to int) bool {
	to = min(to, len(data))
	for from < to {
		j := bytes.Index(data[from:to], magicBytes)
		if j < 0 {
			return false
		}
		q := from + j
		if _, _, err := frame.At(data, q); err == nil {
			return true
		}
		from = q + 1
	}
	return false
}
