package localseg

import (
	"bytes"

	"github.com/bucketlog/bucketlog/frame"
)

// lostSectorHead reports whether the frame at data[p] (file offset base+p)
// with a bad magic is a whole frame whose first bytes were lost with the
// sector that holds them: the sector boundary falls inside its magic, the
// bytes before the boundary are zero (the sector kept its old bytes: the
// store only ever writes over zeros), the magic's bytes after it are right,
// and with the magic put back the frame's length and CRC check out. So one
// interrupted write (a batch) lost its first sector and landed later ones:
// no fsync covered the frame (a completed fsync leaves every byte of it
// intact), so neither it nor anything after it was acknowledged, whatever
// whole frames follow. Without the rule the shard could never open again.
func lostSectorHead(data []byte, base int64, p int) bool {
	k := int(sectorSize - (base+int64(p))%sectorSize) // bytes of the frame in p's sector
	if k > len(magicBytes) || p+HeaderSize > len(data) {
		return false
	}
	if bytes.IndexFunc(data[p:p+k], func(r rune) bool { return r != 0 }) >= 0 || !bytes.Equal(data[p+k:p+4], magicBytes[k:]) {
		return false
	}
	n := HeaderSize + int64(le32(data[p+4:]))
	if n > HeaderSize+MaxBodyLen || n > int64(len(data)-p) {
		return false
	}
	f := append([]byte(nil), data[p:p+int(n)]...)
	copy(f, magicBytes)
	_, _, err := frame.At(f, 0)
	return err == nil
}
