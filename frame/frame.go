package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// The header (FORMAT.md §2.1). Part of the wire format; do not change.
const (
	// Magic opens every frame; on disk 01 00 db e5.
	Magic uint32 = 0xE5DB0001
	// HeaderSize is the length of the header: magic, body length, CRC.
	HeaderSize = 12
	// MaxBodyLen is the largest body a reader accepts.
	MaxBodyLen = 64 << 20
)

// Kind is the variant of a frame.
type Kind uint8

// The variants (FORMAT.md §2.2). Part of the wire format; do not change.
const (
	KindEvent Kind = iota + 1
	KindConsumerCreate
	KindAck
	KindConsumerDelete
)

// Frame is one decoded frame. Which fields are meaningful depends on Kind:
// Event uses Seq, ExecutionID, TransactionID, Payload; ConsumerCreate and
// ConsumerDelete use Consumer; Ack uses Consumer and Seq.
type Frame struct {
	Kind          Kind
	Seq           uint64
	ExecutionID   string
	TransactionID string
	Payload       string
	Consumer      string
}

// SegmentSummary describes a verified segment image.
type SegmentSummary struct {
	Frames, Events    int
	FirstSeq, LastSeq uint64
}

// Errors. They are also the store's (localseg.ErrCorrupt,
// localseg.ErrInvalidInput and localseg.ErrTooLarge are these values, so
// errors.Is agrees across the packages), which is why their texts name
// localseg: they are unchanged from when the codec lived there.
var (
	ErrInvalidInput = errors.New("localseg: invalid input")
	ErrTooLarge     = fmt.Errorf("%w: event too large", ErrInvalidInput)
	// ErrCorrupt marks bytes that are not trustworthy.
	ErrCorrupt = errors.New("localseg: corrupt")
)

// CorruptionError names the segment and byte offset of a corrupt frame.
// errors.Is(err, ErrCorrupt) holds for it.
type CorruptionError struct {
	Segment uint64
	Offset  int64
	Err     error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("localseg: corrupt segment %d at offset %d: %v", e.Segment, e.Offset, e.Err)
}
func (e *CorruptionError) Unwrap() error        { return e.Err }
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Errors of the frame codec. Each wraps ErrCorrupt, so a caller that only
// cares whether bytes are trustworthy tests errors.Is(err, ErrCorrupt).
var (
	ErrShortHeader = fmt.Errorf("%w: fewer than %d bytes left for a frame header", ErrCorrupt, HeaderSize)
	ErrZeroHeader  = fmt.Errorf("%w: zero bytes where a frame header should start", ErrCorrupt)
	ErrBadMagic    = fmt.Errorf("%w: bad frame magic", ErrCorrupt)
	ErrBodyTooLong = fmt.Errorf("%w: body length over the %d-byte cap", ErrCorrupt, MaxBodyLen)
	ErrShortBody   = fmt.Errorf("%w: frame body runs past the end of the data", ErrCorrupt)
	ErrEmptyBody   = fmt.Errorf("%w: zero-length frame body", ErrCorrupt)
	ErrCRC         = fmt.Errorf("%w: CRC mismatch", ErrCorrupt)
	ErrBadBody     = fmt.Errorf("%w: undecodable frame body", ErrCorrupt)
	ErrSeqGap      = fmt.Errorf("%w: gap in global_sequence", ErrCorrupt)
)

// The literal pieces of the canonical (serde_json compact) bodies
// (FORMAT.md §2.3). Part of the wire format; do not change.
const (
	litEventOpen      = `{"Event":{"global_sequence":`
	litExecID         = `,"execution_id":"`
	litTxnID          = `","transaction_id":"`
	litPayload        = `","payload":"`
	litClose2         = `"}}`
	litCreateOpen     = `{"ConsumerCreate":{"consumer":"`
	litAckOpen        = `{"Ack":{"consumer":"`
	litAckSeq         = `","sequence":`
	litDeleteOpen     = `{"ConsumerDelete":{"consumer":"`
	litNumClose       = `}}`
	eventFixedBodyLen = len(litEventOpen) + len(litExecID) + len(litTxnID) + len(litPayload) + len(litClose2)
)

// EventFixedLen is the length of an event frame without its sequence's
// digits and its three strings (as escaped).
const EventFixedLen = HeaderSize + eventFixedBodyLen

// frameKindNames are the variant tags.
var frameKindNames = [...]string{
	KindEvent:          "Event",
	KindConsumerCreate: "ConsumerCreate",
	KindAck:            "Ack",
	KindConsumerDelete: "ConsumerDelete",
}

// String returns the variant tag of k.
func (k Kind) String() string {
	if int(k) < len(frameKindNames) && k != 0 {
		return frameKindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// putHeader fills the 12-byte header at the start of frame, whose body is
// frame[HeaderSize:].
func putHeader(frame []byte) {
	body := frame[HeaderSize:]
	binary.LittleEndian.PutUint32(frame[0:], Magic)
	binary.LittleEndian.PutUint32(frame[4:], uint32(len(body)))
	binary.LittleEndian.PutUint32(frame[8:], checksumIEEE(body))
}

var zeroHeader [HeaderSize]byte

// checksumIEEE is the CRC of a frame body (IEEE polynomial, as FORMAT.md §2.1
// fixes it). It is the standard library's: a hand-kept slicing-by-8 for the
// last len%16 bytes measured no faster on ~350-byte bodies (37 ns a body
// either way) and is not worth a table of our own.
func checksumIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

// AppendEvent appends the frame of an Event. The strings must be valid
// UTF-8 (the caller validated them).
func AppendEvent(dst []byte, seq uint64, exec, txn, payload string) []byte {
	h := len(dst)
	dst = append(dst, zeroHeader[:]...)
	dst = append(dst, litEventOpen...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, litExecID...)
	dst = appendEscapedContent(dst, exec)
	dst = append(dst, litTxnID...)
	dst = appendEscapedContent(dst, txn)
	dst = append(dst, litPayload...)
	dst = appendEscapedContent(dst, payload)
	dst = append(dst, litClose2...)
	putHeader(dst[h:])
	return dst
}

// AppendEventEscaped is AppendEvent for strings the caller has examined:
// exec and a string whose flag is false are copied as they are (they need
// no escaping), the others are escaped.
func AppendEventEscaped(dst []byte, seq uint64, exec, txn string, escTxn bool, payload string, escPayload bool) []byte {
	h := len(dst)
	dst = append(dst, zeroHeader[:]...)
	dst = append(dst, litEventOpen...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, litExecID...)
	dst = append(dst, exec...)
	dst = append(dst, litTxnID...)
	if escTxn {
		dst = appendEscapedContent(dst, txn)
	} else {
		dst = append(dst, txn...)
	}
	dst = append(dst, litPayload...)
	if escPayload {
		dst = appendEscapedContent(dst, payload)
	} else {
		dst = append(dst, payload...)
	}
	dst = append(dst, litClose2...)
	putHeader(dst[h:])
	return dst
}

// EventLen is the length AppendEvent will produce.
func EventLen(seq uint64, exec, txn, payload string) int64 {
	return int64(HeaderSize+eventFixedBodyLen+DecimalLen(seq)) +
		EscapedLen(exec) + EscapedLen(txn) + EscapedLen(payload)
}

// AppendConsumer appends a ConsumerCreate, Ack or ConsumerDelete frame.
func AppendConsumer(dst []byte, kind Kind, consumer string, seq uint64) []byte {
	h := len(dst)
	dst = append(dst, zeroHeader[:]...)
	switch kind {
	case KindConsumerCreate:
		dst = append(dst, litCreateOpen...)
		dst = appendEscapedContent(dst, consumer)
		dst = append(dst, litClose2...)
	case KindAck:
		dst = append(dst, litAckOpen...)
		dst = appendEscapedContent(dst, consumer)
		dst = append(dst, litAckSeq...)
		dst = strconv.AppendUint(dst, seq, 10)
		dst = append(dst, litNumClose...)
	case KindConsumerDelete:
		dst = append(dst, litDeleteOpen...)
		dst = appendEscapedContent(dst, consumer)
		dst = append(dst, litClose2...)
	default:
		panic("frame: AppendConsumer of " + kind.String())
	}
	putHeader(dst[h:])
	return dst
}

func DecimalLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// SWAR helpers: each works on 8 bytes at once and reports whether any byte
// matches. They are exact as booleans (a borrow can only mis-locate a hit,
// never invent one).
const (
	lsb8 = 0x0101010101010101
	msb8 = 0x8080808080808080
)

func hasByteLess(x uint64, n byte) bool { return (x-lsb8*uint64(n))&^x&msb8 != 0 }
func hasByte(x uint64, c byte) bool {
	y := x ^ (lsb8 * uint64(c))
	return (y-lsb8)&^y&msb8 != 0
}

// le64s loads 8 bytes of s at i, as one load (assembling them from eight
// byte loads measured 4x slower: the compiler does not merge them for a
// string).
func le64s(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:i+8]), 8))
}

// escapeFree reports whether s needs no escaping at all (no quote,
// backslash or control character), the common case, at memory speed: the
// quote and backslash are searched with the vectorized IndexByte, control
// characters 16 bytes at a time.
func escapeFree(s string) bool {
	if strings.IndexByte(s, '"') >= 0 || strings.IndexByte(s, '\\') >= 0 {
		return false
	}
	i := 0
	for ; i+16 <= len(s); i += 16 {
		x, y := le64s(s, i), le64s(s, i+8)
		if ((x-lsb8*0x20)&^x|(y-lsb8*0x20)&^y)&msb8 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return false
		}
	}
	return true
}

// needsEscape8 reports whether any of the 8 bytes is a control character,
// a quote or a backslash.
func needsEscape8(x uint64) bool {
	return hasByteLess(x, 0x20) || hasByte(x, '"') || hasByte(x, '\\')
}

const hexDigits = "0123456789abcdef"

// AppendEscaped appends s as a JSON string exactly as serde_json's compact
// writer does: only '"', '\\' and control characters are escaped (\b \f \n
// \r \t by name, the others as \u00XX with lowercase hex); everything else,
// including '<', '>', '&', DEL, U+2028 and U+2029, is copied as raw UTF-8.
func AppendEscaped(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscapedContent(dst, s)
	return append(dst, '"')
}

// appendEscapedContent is AppendEscaped without the quotes (the frame
// encoders' literals carry them).
func appendEscapedContent(dst []byte, s string) []byte {
	if escapeFree(s) {
		return append(dst, s...)
	}
	start, i := 0, 0
	for i < len(s) {
		for i+8 <= len(s) && !needsEscape8(le64s(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	return append(dst, s[start:]...)
}

// EscapedLen is the length AppendEscaped adds for s, without the quotes.
func EscapedLen(s string) int64 {
	n := int64(len(s))
	if escapeFree(s) {
		return n
	}
	for i := 0; i < len(s); {
		for i+8 <= len(s) && !needsEscape8(le64s(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20:
			n += 5
		}
		i++
	}
	return n
}

// Span locates the raw contents of a JSON string inside a body.
type Span struct {
	Lo, Hi int32
	Esc    bool // contains escapes: Unescape before use
}

// View is what the fast parser extracts from a canonical body without
// allocating.
type View struct {
	Kind                         Kind
	Seq                          uint64
	Exec, Txn, Payload, Consumer Span
}

// ParseFast parses a body laid out exactly as this package (and
// serde_json) writes it. It fully validates what it accepts; ok=false means
// "not canonical", and the caller falls back to DecodeBodySlow, which decides
// whether the body is valid JSON of another layout or corrupt.
func ParseFast(b []byte) (v View, ok bool) { return parseBody(b, false) }

// ParseTrusted is ParseFast for a body already validated once (by
// the replay that indexed it, or produced by this package's encoder) whose
// CRC still matches: it locates the strings without re-checking their
// characters, and an event's payload without an escape is taken to run to
// the closing literal (the validation found its closing quote there). A
// body it cannot parse goes to the validating paths.
func ParseTrusted(b []byte) (v View, ok bool) { return parseBody(b, true) }

// ParseEventPlain locates the fields of an event body that was validated
// once and had no escape in any field (segIndex.plain), by the canonical
// layout: one search for each identifier's closing quote, and the payload
// runs to the closing literal. ok=false sends the body to ParseTrusted.
func ParseEventPlain(b []byte, v *View) (ok bool) {
	if !bytes.HasPrefix(b, []byte(litEventOpen)) || !bytes.HasSuffix(b, []byte(litClose2)) {
		return false
	}
	v.Kind = KindEvent
	var i int
	if v.Seq, i, ok = parseUintAt(b, len(litEventOpen)); !ok {
		return false
	}
	field := func(lit string) (Span, bool) {
		if i, ok = litAt(b, i, lit); !ok {
			return Span{}, false
		}
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return Span{}, false
		}
		sp := Span{Lo: int32(i), Hi: int32(i + q)}
		i += q
		return sp, true
	}
	if v.Exec, ok = field(litExecID); !ok {
		return false
	}
	if v.Txn, ok = field(litTxnID); !ok {
		return false
	}
	if i, ok = litAt(b, i, litPayload); !ok || i > len(b)-len(litClose2) {
		return false
	}
	v.Payload = Span{Lo: int32(i), Hi: int32(len(b) - len(litClose2))}
	return true
}

func parseBody(b []byte, trusted bool) (v View, ok bool) {
	var i int
	switch {
	case bytes.HasPrefix(b, []byte(litEventOpen)):
		v.Kind = KindEvent
		if v.Seq, i, ok = parseUintAt(b, len(litEventOpen)); !ok {
			return v, false
		}
		if i, ok = litAt(b, i, litExecID); !ok {
			return v, false
		}
		if v.Exec, i, ok = scanString(b, i, trusted); !ok {
			return v, false
		}
		if i, ok = litAt(b, i-1, litTxnID); !ok {
			return v, false
		}
		if v.Txn, i, ok = scanString(b, i, trusted); !ok {
			return v, false
		}
		if i, ok = litAt(b, i-1, litPayload); !ok {
			return v, false
		}
		if end := len(b) - len(litClose2); trusted && end >= i && string(b[end:]) == litClose2 &&
			bytes.IndexByte(b[i:end], '\\') < 0 {
			// A validated body ends its payload at the closing literal,
			// so without an escape its end is known: one search for a
			// backslash instead of one for the quote and one for a
			// backslash over the longest field.
			v.Payload = Span{Lo: int32(i), Hi: int32(end)}
			return v, true
		}
		if v.Payload, i, ok = scanString(b, i, trusted); !ok {
			return v, false
		}
		i, ok = litAt(b, i-1, litClose2)
		return v, ok && i == len(b)
	case bytes.HasPrefix(b, []byte(litAckOpen)):
		v.Kind = KindAck
		if v.Consumer, i, ok = scanString(b, len(litAckOpen), trusted); !ok {
			return v, false
		}
		if i, ok = litAt(b, i-1, litAckSeq); !ok {
			return v, false
		}
		if v.Seq, i, ok = parseUintAt(b, i); !ok {
			return v, false
		}
		i, ok = litAt(b, i, litNumClose)
		return v, ok && i == len(b)
	case bytes.HasPrefix(b, []byte(litCreateOpen)):
		v.Kind = KindConsumerCreate
		i = len(litCreateOpen)
	case bytes.HasPrefix(b, []byte(litDeleteOpen)):
		v.Kind = KindConsumerDelete
		i = len(litDeleteOpen)
	default:
		return v, false
	}
	if v.Consumer, i, ok = scanString(b, i, trusted); !ok {
		return v, false
	}
	i, ok = litAt(b, i-1, litClose2)
	return v, ok && i == len(b)
}

// litAt matches lit at b[i:] and returns the index after it.
func litAt(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// parseUintAt parses a canonical unsigned decimal (no sign, no leading zero,
// no fraction or exponent) at b[i:].
func parseUintAt(b []byte, i int) (uint64, int, bool) {
	start := i
	var v uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		d := uint64(b[i] - '0')
		// Up to 19 digits cannot overflow; only the 20th needs the
		// check (a division per digit would cost more than the parse).
		if i-start >= 19 && v > (1<<64-1-d)/10 {
			return 0, i, false
		}
		v = v*10 + d
		i++
	}
	n := i - start
	if n == 0 || (n > 1 && b[start] == '0') {
		return 0, i, false
	}
	return v, i, true
}

// scanString validates the JSON string whose contents start at b[i] (just
// after the opening quote) and returns its Span and the index just after
// the closing quote. It rejects raw control characters, malformed escapes,
// lone surrogates and invalid UTF-8, so a body it accepts decodes to exactly
// the text that was written. The closing quote and backslashes are found
// with bytes.IndexByte (vectorized); the runs between are checked 8 bytes
// at a time. The first 16 bytes or so go through scanShort (scan.go).
func scanString(b []byte, i int, trusted bool) (Span, int, bool) {
	start, esc := i, false
	if !trusted {
		var end int
		var done, ok bool
		switch i, end, esc, done, ok = scanShort(b, i); {
		case !ok:
			return Span{}, i, false
		case done:
			return Span{Lo: int32(start), Hi: int32(end - 1), Esc: esc}, end, true
		}
	}
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return Span{}, i, false
		}
		q += i
		bs := bytes.IndexByte(b[i:q], '\\')
		if bs < 0 {
			if !trusted && !validRun(b[i:q]) {
				return Span{}, i, false
			}
			return Span{Lo: int32(start), Hi: int32(q), Esc: esc}, q + 1, true
		}
		bs += i
		if !trusted && !validRun(b[i:bs]) {
			return Span{}, i, false
		}
		n, ok := validEscape(b, bs)
		if !ok {
			return Span{}, i, false
		}
		esc = true
		i = bs + n
	}
}

// validRun reports whether run (string contents without quotes or
// backslashes) has no control character and is valid UTF-8.
func validRun(run []byte) bool {
	ascii := true
	i := 0
	for ; i+32 <= len(run); i += 32 {
		// The common case 32 bytes at a time; a word that may hold
		// anything else goes to the loops below.
		r := run[i : i+32]
		a, b := binary.LittleEndian.Uint64(r), binary.LittleEndian.Uint64(r[8:])
		c, d := binary.LittleEndian.Uint64(r[16:]), binary.LittleEndian.Uint64(r[24:])
		if ((a-lsb8*0x20)|a|(b-lsb8*0x20)|b|(c-lsb8*0x20)|c|(d-lsb8*0x20)|d)&msb8 != 0 {
			break
		}
	}
	for ; i+16 <= len(run); i += 16 {
		// Every byte in [0x20, 0x7f] (the common case) sets no high bit
		// in x, nor in x-0x20 per byte.
		x := binary.LittleEndian.Uint64(run[i:])
		y := binary.LittleEndian.Uint64(run[i+8:])
		if ((x-lsb8*0x20)|x|(y-lsb8*0x20)|y)&msb8 == 0 {
			continue
		}
		if hasByteLess(x, 0x20) || hasByteLess(y, 0x20) {
			return false
		}
		if (x|y)&msb8 != 0 {
			ascii = false
		}
	}
	for ; i+8 <= len(run); i += 8 {
		x := binary.LittleEndian.Uint64(run[i:])
		if hasByteLess(x, 0x20) {
			return false
		}
		if x&msb8 != 0 {
			ascii = false
		}
	}
	for ; i < len(run); i++ {
		if run[i] < 0x20 {
			return false
		}
		if run[i] >= 0x80 {
			ascii = false
		}
	}
	return ascii || utf8.Valid(run)
}

// validEscape checks the escape sequence at b[i] ('\\') and returns its
// length.
func validEscape(b []byte, i int) (int, bool) {
	if i+1 >= len(b) {
		return 0, false
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		r, ok := hex4(b, i+2)
		switch {
		case !ok:
			return 0, false
		case r >= 0xD800 && r < 0xDC00:
			if i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
				return 0, false
			}
			r2, ok := hex4(b, i+8)
			if !ok || r2 < 0xDC00 || r2 >= 0xE000 {
				return 0, false
			}
			return 12, true
		case r >= 0xDC00 && r < 0xE000:
			return 0, false
		}
		return 6, true
	}
	return 0, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Unescape decodes the contents of a JSON string already validated by
// scanString.
func Unescape(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				j = len(raw) - i
			}
			out = append(out, raw[i:i+j]...)
			i += j
			continue
		}
		switch raw[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(raw, i+2)
			if r >= 0xD800 && r < 0xDC00 {
				r2, _ := hex4(raw, i+8)
				r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			out = append(out, raw[i+1])
		}
		i += 2
	}
	return string(out)
}

// Text materializes a Span of body as a string.
func (sp Span) Text(body []byte) string {
	raw := body[sp.Lo:sp.Hi]
	if sp.Esc {
		return Unescape(raw)
	}
	return string(raw)
}

// Frame materializes a view.
func (v *View) Frame(body []byte) Frame {
	f := Frame{Kind: v.Kind, Seq: v.Seq}
	switch v.Kind {
	case KindEvent:
		f.ExecutionID = v.Exec.Text(body)
		f.TransactionID = v.Txn.Text(body)
		f.Payload = v.Payload.Text(body)
	default:
		f.Consumer = v.Consumer.Text(body)
	}
	return f
}

func bodyErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadBody}, args...)...)
}

// DecodeBodySlow decodes any valid JSON encoding of a frame variant:
// whitespace anywhere, fields in any order, unknown fields ignored (forward
// compatibility). Field and variant names match exactly, as serde's do.
// Invalid UTF-8 anywhere is refused rather than replaced, and strings are
// decoded by scanString/Unescape, so nothing is altered on the way.
func DecodeBodySlow(b []byte) (Frame, error) {
	if !utf8.Valid(b) {
		return Frame{}, bodyErr("invalid UTF-8")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return Frame{}, bodyErr("%v", err)
	}
	if len(top) != 1 {
		return Frame{}, bodyErr("want exactly one variant, found %d keys", len(top))
	}
	for name, raw := range top {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			return Frame{}, bodyErr("variant %q is not an object", name)
		}
		var f Frame
		var err error
		switch name {
		case "Event":
			f.Kind = KindEvent
			f.Seq, err = jsonUint(fields, "global_sequence", err)
			f.ExecutionID, err = jsonString(fields, "execution_id", err)
			f.TransactionID, err = jsonString(fields, "transaction_id", err)
			f.Payload, err = jsonString(fields, "payload", err)
		case "ConsumerCreate":
			f.Kind = KindConsumerCreate
			f.Consumer, err = jsonString(fields, "consumer", err)
		case "Ack":
			f.Kind = KindAck
			f.Consumer, err = jsonString(fields, "consumer", err)
			f.Seq, err = jsonUint(fields, "sequence", err)
		case "ConsumerDelete":
			f.Kind = KindConsumerDelete
			f.Consumer, err = jsonString(fields, "consumer", err)
		default:
			return Frame{}, bodyErr("unknown variant %.64q", name)
		}
		return f, err
	}
	panic("unreachable")
}

func jsonString(fields map[string]json.RawMessage, name string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	raw, ok := fields[name]
	if !ok {
		return "", bodyErr("missing field %q", name)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' {
		return "", bodyErr("field %q is not a string", name)
	}
	sp, end, ok := scanString(raw, 1, false)
	if !ok || end != len(raw) {
		return "", bodyErr("field %q: malformed string", name)
	}
	return sp.Text(raw), nil
}

func jsonUint(fields map[string]json.RawMessage, name string, err error) (uint64, error) {
	if err != nil {
		return 0, err
	}
	raw, ok := fields[name]
	if !ok {
		return 0, bodyErr("missing field %q", name)
	}
	raw = bytes.TrimSpace(raw)
	v, end, ok := parseUintAt(raw, 0)
	if !ok || end != len(raw) {
		return 0, bodyErr("field %q is not an unsigned integer: %.32s", name, raw)
	}
	return v, nil
}

// DecodeBody decodes a body, by the fast path when it is canonical.
func DecodeBody(body []byte) (Frame, error) {
	if v, ok := ParseFast(body); ok {
		return v.Frame(body), nil
	}
	return DecodeBodySlow(body)
}

// At checks the frame starting at data[o]: header, length and CRC. It
// returns the frame's total length and its body, or an error saying why no
// valid frame starts there (for a CRC mismatch, with the length and body the
// header claims). The body itself is not parsed.
func At(data []byte, o int) (int, []byte, error) {
	n, body, err := AtUnchecked(data, o)
	if err != nil {
		return n, body, err
	}
	if checksumIEEE(body) != le32(data[o+8:]) {
		// The claimed extent is still returned: torn-tail analysis
		// looks at it.
		return n, body, ErrCRC
	}
	return n, body, nil
}

// AtUnchecked is At without the CRC: for bytes whose every frame's CRC was
// checked already and that cannot have changed since (a verified copy held
// in memory, never written). Header and length are still checked.
func AtUnchecked(data []byte, o int) (int, []byte, error) {
	if o < 0 || len(data)-o < HeaderSize {
		return 0, nil, ErrShortHeader
	}
	h := data[o : o+HeaderSize]
	if m := le32(h); m != Magic {
		if m == 0 {
			return 0, nil, ErrZeroHeader
		}
		return 0, nil, ErrBadMagic
	}
	n := le32(h[4:])
	if n > MaxBodyLen {
		return 0, nil, ErrBodyTooLong
	}
	if int64(n) > int64(len(data)-o-HeaderSize) {
		return 0, nil, ErrShortBody
	}
	if n == 0 {
		// No variant has an empty body; a zero length (with a zero CRC,
		// which an empty body would match) is what a lost sector leaves
		// in a header that straddles two sectors.
		return HeaderSize, data[o+HeaderSize : o+HeaderSize], ErrEmptyBody
	}
	return HeaderSize + int(n), data[o+HeaderSize : o+HeaderSize+int(n)], nil
}

// Encode appends the frame (header and body) to dst. The body is the
// canonical compact JSON of FORMAT.md §2.3, byte-identical to serde_json's. Strings
// must be valid UTF-8 (ErrInvalidInput otherwise; they are never altered);
// identifiers are not checked against the store's rules here.
func Encode(dst []byte, f *Frame) ([]byte, error) {
	check := func(what, s string) error {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidInput, what)
		}
		return nil
	}
	var n int64
	switch f.Kind {
	case KindEvent:
		if err := errors.Join(check("execution_id", f.ExecutionID), check("transaction_id", f.TransactionID), check("payload", f.Payload)); err != nil {
			return dst, err
		}
		n = EventLen(f.Seq, f.ExecutionID, f.TransactionID, f.Payload)
	case KindConsumerCreate, KindAck, KindConsumerDelete:
		if err := check("consumer", f.Consumer); err != nil {
			return dst, err
		}
		n = HeaderSize + int64(len(litAckOpen)+len(litAckSeq)+len(litNumClose)+20) + EscapedLen(f.Consumer)
	default:
		return dst, fmt.Errorf("%w: unknown frame kind %d", ErrInvalidInput, f.Kind)
	}
	if n-HeaderSize > MaxBodyLen {
		return dst, fmt.Errorf("%w: frame body of %d bytes is over the %d-byte cap", ErrTooLarge, n-HeaderSize, MaxBodyLen)
	}
	if f.Kind == KindEvent {
		return AppendEvent(dst, f.Seq, f.ExecutionID, f.TransactionID, f.Payload), nil
	}
	return AppendConsumer(dst, f.Kind, f.Consumer, f.Seq), nil
}

// Decode decodes the frame at the start of b and returns its length.
// Errors wrap ErrCorrupt: too few bytes, a bad magic, a length over the cap
// or past the end of b, a CRC mismatch, or a body that is not valid JSON of
// a known variant (unknown fields are ignored).
func Decode(b []byte) (Frame, int, error) {
	n, body, err := At(b, 0)
	if err != nil {
		return Frame{}, 0, err
	}
	f, err := DecodeBody(body)
	if err != nil {
		return Frame{}, 0, err
	}
	return f, n, nil
}

// Frames iterates over the frames of b, stopping at the first error (a
// *CorruptionError whose Offset locates it; Segment is 0).
func Frames(b []byte) iter.Seq2[Frame, error] {
	return func(yield func(Frame, error) bool) {
		for o := 0; o < len(b); {
			f, n, err := Decode(b[o:])
			if err != nil {
				yield(Frame{}, &CorruptionError{Offset: int64(o), Err: err})
				return
			}
			if !yield(f, nil) {
				return
			}
			o += n
		}
	}
}
