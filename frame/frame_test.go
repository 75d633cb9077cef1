package frame

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"testing"
)

// The golden vectors of docs/FORMAT.md §2.5. testdata/golden_frames.bin holds both
// frames as an independent encoder (Python's json layout written by hand and
// zlib.crc32) produced them.
var goldenFrames = []struct {
	frame  Frame
	body   string
	header string
}{
	{
		frame:  Frame{Kind: KindEvent, Seq: 1, ExecutionID: "100", TransactionID: "txn-100-1", Payload: "a"},
		body:   `{"Event":{"global_sequence":1,"execution_id":"100","transaction_id":"txn-100-1","payload":"a"}}`,
		header: "0100dbe55f000000401b88ab",
	},
	{
		frame:  Frame{Kind: KindEvent, Seq: 2, ExecutionID: "100", TransactionID: "txn-100-2", Payload: `<a href="x">&amp; é — 日本</a>`},
		body:   `{"Event":{"global_sequence":2,"execution_id":"100","transaction_id":"txn-100-2","payload":"<a href=\"x\">&amp; é — 日本</a>"}}`,
		header: "0100dbe5830000005dc6a018",
	},
}

func TestGoldenFrames(t *testing.T) {
	fixture, err := os.ReadFile("testdata/golden_frames.bin")
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for i, g := range goldenFrames {
		got, err := Encode(nil, &g.frame)
		if err != nil {
			t.Fatal(err)
		}
		if h := hex.EncodeToString(got[:HeaderSize]); h != g.header {
			t.Errorf("vector %d: header %s, want %s", i, h, g.header)
		}
		if string(got[HeaderSize:]) != g.body {
			t.Errorf("vector %d: body\n%s\nwant\n%s", i, got[HeaderSize:], g.body)
		}
		f, n, err := Decode(got)
		if err != nil || n != len(got) || f != g.frame {
			t.Errorf("vector %d: decode = %+v, %d, %v", i, f, n, err)
		}
		all = append(all, got...)
	}
	if len(goldenFrames[0].body) != 95 || len(goldenFrames[1].body) != 131 {
		t.Errorf("body lengths %d and %d, want 95 and 131", len(goldenFrames[0].body), len(goldenFrames[1].body))
	}
	if !bytes.Equal(all, fixture) {
		t.Errorf("encoding differs from testdata/golden_frames.bin:\n%x\n%x", all, fixture)
	}
}

func TestCRCVector(t *testing.T) {
	// CHECKLIST §1.14.
	if got := crc32.ChecksumIEEE([]byte("123456789")); got != 0xCBF43926 {
		t.Fatalf("CRC-32 of 123456789 = %#x, want 0xCBF43926", got)
	}
}

// TestEscaping pins the serde_json escaping rules byte for byte.
func TestEscaping(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`<>&`, `"<>&"`},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"\x7f", "\"\x7f\""},
		{`"\`, `"\"\\"`},
		{"/", `"/"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f\x0b", `"\u0000\u0001\u001f\u000b"`},
		{"é日本😀", `"é日本😀"`},
		{strings.Repeat("abcdefgh", 3) + "\n" + strings.Repeat("x", 9), `"` + strings.Repeat("abcdefgh", 3) + `\n` + strings.Repeat("x", 9) + `"`},
	}
	for _, c := range cases {
		got := string(AppendEscaped(nil, c.in))
		if got != c.want {
			t.Errorf("escape %q = %s, want %s", c.in, got, c.want)
		}
		if n := EscapedLen(c.in) + 2; n != int64(len(got)) {
			t.Errorf("EscapedLen(%q) = %d, encoded %d", c.in, n-2, len(got))
		}
		// Go's decoder reads it back to the same string.
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil || back != c.in {
			t.Errorf("round trip of %q: %q, %v", c.in, back, err)
		}
	}
}

// TestDecodeAlternativeLayouts: other valid JSON encodings of a frame decode
// (slow path) to the same frame; unknown fields are ignored.
func TestDecodeAlternativeLayouts(t *testing.T) {
	want := Frame{Kind: KindEvent, Seq: 7, ExecutionID: "e-1", TransactionID: "t", Payload: "p\n\"é"}
	bodies := []string{
		`{"Event":{"global_sequence":7,"execution_id":"e-1","transaction_id":"t","payload":"p\n\"é"}}`,
		` { "Event" : { "payload" : "p\n\"\u00e9" , "transaction_id":"t", "global_sequence": 7, "execution_id":"e\u002d1" } } `,
		`{"Event":{"global_sequence":7,"future":{"x":[1,2]},"execution_id":"e-1","transaction_id":"t","payload":"p\n\"é"}}`,
	}
	for _, b := range bodies {
		f, err := DecodeBody([]byte(b))
		if err != nil || f != want {
			t.Errorf("%s: %+v, %v", b, f, err)
		}
	}
	acks := map[string]Frame{
		`{"Ack":{"sequence":3,"consumer":"c"}}`:          {Kind: KindAck, Seq: 3, Consumer: "c"},
		`{"ConsumerCreate":{"consumer":"c","x":null}}`:   {Kind: KindConsumerCreate, Consumer: "c"},
		`{"ConsumerDelete":{"consumer":"\ud83d\ude00"}}`: {Kind: KindConsumerDelete, Consumer: "😀"},
	}
	for b, w := range acks {
		if f, err := DecodeBody([]byte(b)); err != nil || f != w {
			t.Errorf("%s: %+v, %v", b, f, err)
		}
	}
}

// TestDecodeRejects: anything that is not a valid frame body is an error
// wrapping ErrCorrupt, never a silently altered frame.
func TestDecodeRejects(t *testing.T) {
	bad := []string{
		``,
		`null`,
		`{}`,
		`[]`,
		`{"Event":{"global_sequence":1,"execution_id":"e","transaction_id":"t"}}`,                // missing payload
		`{"Event":{"global_sequence":-1,"execution_id":"e","transaction_id":"t","payload":""}}`,  // negative
		`{"Event":{"global_sequence":1.0,"execution_id":"e","transaction_id":"t","payload":""}}`, // float
		`{"Event":{"global_sequence":"1","execution_id":"e","transaction_id":"t","payload":""}}`, // string
		`{"Event":{"global_sequence":18446744073709551616,"execution_id":"e","transaction_id":"t","payload":""}}`,
		`{"event":{"global_sequence":1,"execution_id":"e","transaction_id":"t","payload":""}}`, // case
		`{"Event":{"Global_Sequence":1,"execution_id":"e","transaction_id":"t","payload":""}}`, // case
		`{"Snapshot":{"x":1}}`,                                         // unknown variant
		`{"Ack":{"consumer":"c","sequence":1},"Event":{}}`,             // two variants
		`{"Ack":{"consumer":"c","sequence":1}} x`,                      // trailing
		`{"Ack":{"consumer":"\ud800","sequence":1}}`,                   // lone surrogate
		`{"Ack":{"consumer":"\udc00x","sequence":1}}`,                  // lone low surrogate
		`{"Ack":{"consumer":"a` + "\x01" + `","sequence":1}}`,          // raw control
		"{\"Ack\":{\"consumer\":\"\xff\",\"sequence\":1}}",             // invalid UTF-8
		"{\"Ack\":{\"consumer\":\"c\",\"sequence\":1,\"x\":\"\xc3\"}}", // invalid UTF-8 in an unknown field
		`{"Ack":{"consumer":"c","sequence":01}}`,                       // leading zero
		`{"Ack":{"consumer":"c\q","sequence":1}}`,                      // bad escape
		`{"Ack":"c"}`,
	}
	for _, b := range bad {
		if f, err := DecodeBody([]byte(b)); err == nil {
			t.Errorf("%q decoded to %+v", b, f)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v does not wrap ErrCorrupt", b, err)
		}
	}
}

// TestFastPathAgreesWithSlow: the allocation-free parser and the
// encoding/json fallback agree on every canonical body.
func TestFastPathAgreesWithSlow(t *testing.T) {
	payloads := []string{"", "a", `"\`, "\x00\x1f", "é—日本\u2028", strings.Repeat("<&>", 100), "\U0001F600"}
	for i, p := range payloads {
		for _, f := range []Frame{
			{Kind: KindEvent, Seq: uint64(i) * 1e17, ExecutionID: "x_y-Z9", TransactionID: p + "t", Payload: p},
			{Kind: KindAck, Seq: 18446744073709551615, Consumer: "c" + p},
			{Kind: KindConsumerCreate, Consumer: p},
			{Kind: KindConsumerDelete, Consumer: p},
		} {
			b, err := Encode(nil, &f)
			if err != nil {
				t.Fatal(err)
			}
			body := b[HeaderSize:]
			v, ok := ParseFast(body)
			if !ok {
				t.Fatalf("fast path refused canonical %s", body)
			}
			slow, err := DecodeBodySlow(body)
			if err != nil || v.Frame(body) != slow || slow != f {
				t.Fatalf("fast %+v, slow %+v (%v), want %+v", v.Frame(body), slow, err, f)
			}
		}
	}
}

func TestEncodeFrameRejects(t *testing.T) {
	for _, f := range []Frame{
		{Kind: 0},
		{Kind: 9},
		{Kind: KindEvent, Payload: "\xff"},
		{Kind: KindEvent, ExecutionID: "a\xc3"},
		{Kind: KindAck, Consumer: "\xed\xa0\x80"}, // an encoded surrogate is not valid UTF-8
	} {
		if _, err := Encode(nil, &f); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: %v, want ErrInvalidInput", f, err)
		}
	}
	big := Frame{Kind: KindEvent, Payload: strings.Repeat("x", MaxBodyLen)}
	if _, err := Encode(nil, &big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a body over the cap: %v, want ErrTooLarge", err)
	}
}

func TestDecodeFrameHeaderErrors(t *testing.T) {
	good, _ := Encode(nil, &goldenFrames[0].frame)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", good[:11], ErrShortHeader},
		{"zero header", make([]byte, 20), ErrZeroHeader},
		{"bad magic", mut(func(b []byte) []byte { b[3] = 0xe6; return b }), ErrBadMagic},
		{"over the cap", mut(func(b []byte) []byte { b[7] = 0x10; return b }), ErrBodyTooLong},
		{"short body", good[:len(good)-1], ErrShortBody},
		{"crc", mut(func(b []byte) []byte { b[HeaderSize+5] ^= 1; return b }), ErrCRC},
	}
	for _, c := range cases {
		if _, _, err := Decode(c.b); !errors.Is(err, c.want) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestFramesAndVerifySegment(t *testing.T) {
	var img []byte
	img, _ = Encode(img, &Frame{Kind: KindConsumerCreate, Consumer: "c"})
	for seq := uint64(5); seq <= 7; seq++ {
		img, _ = Encode(img, &Frame{Kind: KindEvent, Seq: seq, ExecutionID: "e", TransactionID: "t", Payload: "p"})
	}
	img, _ = Encode(img, &Frame{Kind: KindAck, Consumer: "c", Seq: 6})
	n := 0
	for f, err := range Frames(img) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		_ = f
	}
	if n != 5 {
		t.Fatalf("%d frames", n)
	}
	sum, err := VerifySegment(3, img, 5)
	if err != nil || sum != (SegmentSummary{Frames: 5, Events: 3, FirstSeq: 5, LastSeq: 7}) {
		t.Fatalf("%+v %v", sum, err)
	}
	if _, err := VerifySegment(3, img, 4); err == nil {
		t.Fatal("a sequence gap was accepted")
	} else if ce := (*CorruptionError)(nil); !errors.As(err, &ce) || ce.Segment != 3 || !errors.Is(err, ErrSeqGap) {
		t.Fatalf("gap: %v", err)
	}
	if sum, err := VerifySegment(3, img[:len(img)-1], 0); err == nil || sum.Events != 3 {
		t.Fatalf("a cut frame was accepted: %+v %v", sum, err)
	}
	var ce *CorruptionError
	bad := append([]byte(nil), img...)
	bad[len(bad)-3] ^= 0x40
	_, err = VerifySegment(9, bad, 0)
	if !errors.As(err, &ce) || ce.Segment != 9 || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a flipped byte: %v", err)
	}
	if sum, err := VerifySegment(1, nil, 8); err != nil || sum.FirstSeq != 8 || sum.LastSeq != 7 {
		t.Fatalf("empty image: %+v %v", sum, err)
	}
	// Frames reports the error and stops.
	var errs int
	for _, err := range Frames(bad) {
		if err != nil {
			errs++
		}
	}
	if errs != 1 {
		t.Fatalf("%d errors from Frames", errs)
	}
}

// TestChecksumIEEE: the frame checksum is crc32.ChecksumIEEE at every
// length (the carry-less-multiplication part and the slicing tail meet at
// every alignment).
func TestChecksumIEEE(t *testing.T) {
	b := make([]byte, 4200)
	for i := range b {
		b[i] = byte(i*131 + i>>5)
	}
	for n := 0; n <= len(b); n++ {
		for _, off := range []int{0, 1, 7} {
			if off > n {
				continue
			}
			if got, want := checksumIEEE(b[off:n]), crc32.ChecksumIEEE(b[off:n]); got != want {
				t.Fatalf("[%d:%d]: %08x, want %08x", off, n, got, want)
			}
		}
	}
}

// TestParseUintAtBounds: the largest uint64 parses, one more does not, and
// the non-canonical forms are refused.
func TestParseUintAtBounds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"7}", 7, true},
		{"9999999999999999999", 9999999999999999999, true},
		{"18446744073709551615", 18446744073709551615, true},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"184467440737095516150", 0, false},
		{"01", 0, false},
		{"", 0, false},
		{"-1", 0, false},
	} {
		v, _, ok := parseUintAt([]byte(c.in), 0)
		if ok != c.ok || (ok && v != c.want) {
			t.Errorf("%q: %d %v, want %d %v", c.in, v, ok, c.want, c.ok)
		}
	}
}

// TestEscapeFree: the fast check agrees with a byte-by-byte one for every
// byte value at every position of strings of every length up to 40.
func TestEscapeFree(t *testing.T) {
	slow := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	for n := 0; n <= 40; n++ {
		base := []byte(strings.Repeat("aé~\x7f", 10)[:n])
		if !escapeFree(string(base)) {
			t.Fatalf("%q needs no escaping", base)
		}
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := append([]byte(nil), base...)
				b[pos] = byte(c)
				if got, want := escapeFree(string(b)), slow(string(b)); got != want {
					t.Fatalf("%q: %v, want %v", b, got, want)
				}
			}
		}
	}
}
