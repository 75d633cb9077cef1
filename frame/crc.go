package frame

import (
	"encoding/binary"
	"hash/crc32"
)

// crcTail16[k][b] is the CRC register (IEEE, reflected, not inverted) after
// the byte b followed by k zero bytes, from a zero register: the tables of a
// slicing-by-16 update, used for the last len%16 bytes of a body.
var crcTail16 = func() (t [16][256]uint32) {
	t[0] = *crc32.IEEETable
	for k := 1; k < 16; k++ {
		for b := range 256 {
			v := t[k-1][b]
			t[k][b] = t[0][byte(v)] ^ v>>8
		}
	}
	return t
}()

// crcBody is crc32.ChecksumIEEE(b), the frame checksum of FORMAT.md §2.1.
// The standard library folds the 16-byte blocks of an input of 64 bytes or
// more with carry-less multiplication and then walks the last len%16 bytes
// one dependent table lookup at a time (~1.4 ns a byte here, up to a
// third of the cost of a ~360-byte body). Here the folded part goes to the same library
// path (crc32.Update on crc32.IEEETable, the only table that takes it), and
// the tail is one straight-line slicing-by-16 step over the last 16 bytes
// of b with the bytes before the tail masked to zero (a zero byte adds
// nothing to a zero register): sixteen independent lookups.
func crcBody(b []byte) uint32 {
	n := len(b) &^ 15
	if len(b) < 64 || len(b)-n < 6 {
		// Five bytes or fewer walk as fast as the sixteen lookups take.
		return crc32.ChecksumIEEE(b)
	}
	crc := crc32.Update(0, crc32.IEEETable, b[:n])
	return ^crcTail(^crc, b[len(b)-16:], len(b)-n)
}

// crcTail advances the register s over the last r bytes (0 < r < 16) of
// the 16-byte window w. The register is XORed into the first four tail
// bytes; when r < 4 its bytes past the window are what remains of it
// (s >> 8r), as a bytewise update would leave them.
func crcTail(s uint32, w []byte, r int) uint32 {
	t := &crcTail16
	hi := binary.LittleEndian.Uint64(w[8:])
	if r <= 8 {
		// The tail fits the last 8 bytes: half the lookups.
		sh := uint(64 - 8*r)
		hi = hi&(^uint64(0)<<sh) ^ uint64(s)<<sh
		var rest uint32
		if r < 4 {
			rest = s >> (8 * r)
		}
		return rest ^
			t[7][byte(hi)] ^ t[6][byte(hi>>8)] ^ t[5][byte(hi>>16)] ^ t[4][byte(hi>>24)] ^
			t[3][byte(hi>>32)] ^ t[2][byte(hi>>40)] ^ t[1][byte(hi>>48)] ^ t[0][byte(hi>>56)]
	}
	lo := binary.LittleEndian.Uint64(w)
	sh := uint(8 * (16 - r)) // bit offset of the tail in the 128-bit window
	lo &= ^uint64(0) << sh
	lo ^= uint64(s) << sh
	hi ^= uint64(s) >> (64 - sh)
	return t[15][byte(lo)] ^ t[14][byte(lo>>8)] ^ t[13][byte(lo>>16)] ^ t[12][byte(lo>>24)] ^
		t[11][byte(lo>>32)] ^ t[10][byte(lo>>40)] ^ t[9][byte(lo>>48)] ^ t[8][byte(lo>>56)] ^
		t[7][byte(hi)] ^ t[6][byte(hi>>8)] ^ t[5][byte(hi>>16)] ^ t[4][byte(hi>>24)] ^
		t[3][byte(hi>>32)] ^ t[2][byte(hi>>40)] ^ t[1][byte(hi>>48)] ^ t[0][byte(hi>>56)]
}
