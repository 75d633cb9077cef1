package blobtier

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// The key layout is part of the bucket format (docs/FORMAT.md §6.1); do not change it.
// Every number is lowercase hex of a fixed width, so keys sort in numeric
// order and a listing by prefix walks one kind of one shard in order.
const (
	keyRoot = "noetl.ehdb."

	tokSegment   = "seg"
	tokTail      = "tail"
	tokWatermark = "rw"
	tokCursor    = "cur"
	tokClaim     = "ep"
	tokStart     = "eps"
	tokIndex     = "idx"

	shardWidth = 8  // <shard:08x>
	numWidth   = 16 // <segment_id:016x>, <first_seq:016x>, <last_seq:016x>

	// SegmentKeyLen is the length of every segment key.
	SegmentKeyLen = len(keyRoot) + len(tokSegment) + 1 + shardWidth + 1 + numWidth
)

// String returns the kind's token in keys ("seg", "tail", "rw", "cur", "ep",
// "eps", "idx").
func (k Kind) String() string {
	switch k {
	case KindSegment:
		return tokSegment
	case KindTail:
		return tokTail
	case KindWatermark:
		return tokWatermark
	case KindCursor:
		return tokCursor
	case KindClaim:
		return tokClaim
	case KindStart:
		return tokStart
	case KindIndex:
		return tokIndex
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (k Kind) valid() bool { return k >= KindSegment && k <= KindIndex }

// SegmentKey is `noetl.ehdb.seg.<shard:08x>.<segment_id:016x>`, always
// SegmentKeyLen (40) characters.
func SegmentKey(shard uint32, id uint64) string {
	return fmt.Sprintf("%s%s.%08x.%016x", keyRoot, tokSegment, shard, id)
}

// IndexKey is `noetl.ehdb.idx.<shard:08x>.<segment_id:016x>`: the derived
// index of sealed segment id (docs/FORMAT.md §6.10), SegmentKeyLen
// characters like the segment's own key.
func IndexKey(shard uint32, id uint64) string {
	return fmt.Sprintf("%s%s.%08x.%016x", keyRoot, tokIndex, shard, id)
}

// TailKey is `noetl.ehdb.tail.<shard:08x>.<first_seq:016x>.<last_seq:016x>`.
// A key with firstSeq > lastSeq does not parse, and every write refuses it.
func TailKey(shard uint32, firstSeq, lastSeq uint64) string {
	return fmt.Sprintf("%s%s.%08x.%016x.%016x", keyRoot, tokTail, shard, firstSeq, lastSeq)
}

// WatermarkKey is `noetl.ehdb.rw.<shard:08x>`.
func WatermarkKey(shard uint32) string {
	return fmt.Sprintf("%s%s.%08x", keyRoot, tokWatermark, shard)
}

// CursorKey is `noetl.ehdb.cur.<shard:08x>`.
func CursorKey(shard uint32) string {
	return fmt.Sprintf("%s%s.%08x", keyRoot, tokCursor, shard)
}

// ClaimKey is `noetl.ehdb.ep.<shard:08x>.<epoch:016x>`: the claim of an
// ownership epoch (docs/FORMAT.md, writer fencing).
func ClaimKey(shard uint32, epoch uint64) string {
	return fmt.Sprintf("%s%s.%08x.%016x", keyRoot, tokClaim, shard, epoch)
}

// StartKey is `noetl.ehdb.eps.<shard:08x>.<epoch:016x>`: the start record
// (the cut) of an ownership epoch.
func StartKey(shard uint32, epoch uint64) string {
	return fmt.Sprintf("%s%s.%08x.%016x", keyRoot, tokStart, shard, epoch)
}

// ListPrefix is the listing prefix of one kind of one shard:
// `noetl.ehdb.<kind>.<shard:08x>.` for segments, tail objects, claims,
// start records and index objects, and the
// object's own key for the watermark and the cursors. It is "" for an
// unknown kind.
func ListPrefix(shard uint32, kind Kind) string {
	switch kind {
	case KindSegment, KindTail, KindClaim, KindStart, KindIndex:
		return fmt.Sprintf("%s%s.%08x.", keyRoot, kind, shard)
	case KindWatermark:
		return WatermarkKey(shard)
	case KindCursor:
		return CursorKey(shard)
	}
	return ""
}

// ParseKey parses a key built by SegmentKey, TailKey, WatermarkKey,
// CursorKey, ClaimKey, StartKey or IndexKey. It is strict: the numbers must be lowercase hex of exactly the
// documented width, there must be no extra part, and a tail key's first
// sequence must not exceed its last. Anything else is ErrBadKey.
func ParseKey(key string) (Key, error) {
	bad := func(why string) (Key, error) {
		return Key{}, fmt.Errorf("%w: %q: %s", ErrBadKey, key, why)
	}
	rest, ok := strings.CutPrefix(key, keyRoot)
	if !ok {
		return bad("not under " + keyRoot)
	}
	parts := strings.Split(rest, ".")
	var k Key
	var want int
	switch parts[0] {
	case tokSegment:
		k.Kind, want = KindSegment, 3
	case tokTail:
		k.Kind, want = KindTail, 4
	case tokWatermark:
		k.Kind, want = KindWatermark, 2
	case tokCursor:
		k.Kind, want = KindCursor, 2
	case tokClaim:
		k.Kind, want = KindClaim, 3
	case tokStart:
		k.Kind, want = KindStart, 3
	case tokIndex:
		k.Kind, want = KindIndex, 3
	default:
		return bad("unknown kind " + strconv.Quote(parts[0]))
	}
	if len(parts) != want {
		return bad(fmt.Sprintf("%d parts after %s, want %d", len(parts), keyRoot, want))
	}
	shard, err := parseHex(parts[1], shardWidth)
	if err != nil {
		return bad("shard: " + err.Error())
	}
	k.Shard = uint32(shard)
	switch k.Kind {
	case KindSegment, KindIndex:
		if k.Segment, err = parseHex(parts[2], numWidth); err != nil {
			return bad("segment id: " + err.Error())
		}
	case KindTail:
		if k.FirstSeq, err = parseHex(parts[2], numWidth); err != nil {
			return bad("first sequence: " + err.Error())
		}
		if k.LastSeq, err = parseHex(parts[3], numWidth); err != nil {
			return bad("last sequence: " + err.Error())
		}
		if k.FirstSeq > k.LastSeq {
			return bad("first sequence above last")
		}
	case KindClaim, KindStart:
		if k.Epoch, err = parseHex(parts[2], numWidth); err != nil {
			return bad("epoch: " + err.Error())
		}
		if k.Epoch == 0 {
			return bad("epoch 0 is never claimed")
		}
	}
	return k, nil
}

// String rebuilds the key k was parsed from.
func (k Key) String() string {
	switch k.Kind {
	case KindSegment:
		return SegmentKey(k.Shard, k.Segment)
	case KindTail:
		return TailKey(k.Shard, k.FirstSeq, k.LastSeq)
	case KindWatermark:
		return WatermarkKey(k.Shard)
	case KindCursor:
		return CursorKey(k.Shard)
	case KindClaim:
		return ClaimKey(k.Shard, k.Epoch)
	case KindStart:
		return StartKey(k.Shard, k.Epoch)
	case KindIndex:
		return IndexKey(k.Shard, k.Segment)
	}
	return ""
}

// parseHex accepts exactly width lowercase hex digits.
func parseHex(s string, width int) (uint64, error) {
	if len(s) != width {
		return 0, fmt.Errorf("%q is %d characters, want %d", s, len(s), width)
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, fmt.Errorf("%q is not lowercase hex", s)
		}
		v = v<<4 | uint64(d)
	}
	return v, nil
}

// Digest is XXH64 with seed 0 of data: the `xxh64` metadata of an object.
func Digest(data []byte) uint64 { return xxhash.Sum64(data) }
