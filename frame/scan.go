package frame

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// special8 flags (in the high bit of each byte, the lowest flag exact) the
// bytes of x that end a plain run of string contents: a quote, a backslash,
// a control character or a non-ASCII byte.
func special8(x uint64) uint64 {
	q := x ^ lsb8*'"'
	e := x ^ lsb8*'\\'
	return ((x-lsb8*0x20)&^x | (q-lsb8)&^q | (e-lsb8)&^e | x) & msb8
}

// scanShort validates the first 16 bytes or so of the string contents at
// b[i:] in one pass, 8 bytes at a time, by the same rules as scanString
// (no control character, well-formed escapes, valid UTF-8). Most
// identifiers end within them: done reports that the closing quote was
// found at b[end-1]. Otherwise ok=false means the string is invalid, and
// ok=true that the contents up to i2 (a character boundary) are valid and
// scanString goes on from there. Per-frame, it spares a short string the
// two searches and the run check whose fixed costs exceed its length.
func scanShort(b []byte, i int) (i2, end int, esc, done, ok bool) {
	for k := 0; k < 2 && i+8 <= len(b); k++ {
		m := special8(binary.LittleEndian.Uint64(b[i:]))
		if m == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(m) >> 3
		switch c := b[i]; {
		case c == '"':
			return i, i + 1, esc, true, true
		case c == '\\':
			n, ok := validEscape(b, i)
			if !ok {
				return i, 0, esc, false, false
			}
			esc = true
			i += n
		case c < 0x20:
			return i, 0, esc, false, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, 0, esc, false, false
			}
			i += size
		}
	}
	return i, 0, esc, false, true
}
