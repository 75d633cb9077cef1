package frame

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unicode/utf8"
)

// scanStringRef is scanString as it was before scanShort: the reference
// the differential tests hold the current one to.
func scanStringRef(b []byte, i int) (Span, int, bool) {
	start, esc := i, false
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return Span{}, i, false
		}
		q += i
		bs := bytes.IndexByte(b[i:q], '\\')
		if bs < 0 {
			if !validRun(b[i:q]) {
				return Span{}, i, false
			}
			return Span{Lo: int32(start), Hi: int32(q), Esc: esc}, q + 1, true
		}
		bs += i
		if !validRun(b[i:bs]) {
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

// checkScanAgrees compares scanString with the reference at every offset
// of b: the same verdict and, when both accept, the same span and end.
func checkScanAgrees(t *testing.T, b []byte) {
	t.Helper()
	for i := 0; i <= len(b); i++ {
		sp, end, ok := scanString(b, i, false)
		rsp, rend, rok := scanStringRef(b, i)
		if ok != rok || ok && (sp != rsp || end != rend) {
			t.Fatalf("%q at %d: %v %d %v, reference %v %d %v", b, i, sp, end, ok, rsp, rend, rok)
		}
	}
}

// TestScanStringAgreesWithReference: over the fuzz corpus, the golden
// frames and random strings drawn from the bytes that matter to a JSON
// string (quotes, backslashes, escape letters, hex digits, control and
// non-ASCII bytes, truncated and overlong UTF-8, surrogates), the
// single-pass scan accepts and rejects exactly what the reference does.
func TestScanStringAgreesWithReference(t *testing.T) {
	var inputs [][]byte
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecodeFrame/*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The corpus files hold one []byte("...") line after the header.
		for _, line := range bytes.Split(data, []byte("\n")) {
			if s, ok := bytes.CutPrefix(line, []byte("[]byte(")); ok {
				if u, err := strconv.Unquote(string(bytes.TrimSuffix(s, []byte(")")))); err == nil {
					inputs = append(inputs, []byte(u))
				}
			}
		}
	}
	if len(inputs) == 0 {
		t.Fatal("no fuzz corpus read")
	}
	for _, g := range goldenFrames {
		b, _ := Encode(nil, &g.frame)
		inputs = append(inputs, b)
	}
	for _, b := range inputs {
		checkScanAgrees(t, b)
	}
	alphabet := []string{`"`, `\`, `u`, `n`, `/`, `0`, `D8`, `dc`, `DF`, `a`, `F`, "x", "\x00", "\x1f", "\x7f",
		"\x80", "\xbf", "\xc0", "\xc3", "\xa9", "\xe2\x82", "\xe2\x82\xac", "\xed\xa0\x80", "\xf0\x9f\x98\x80",
		"\xf4\x90\x80\x80", "\xff", `\u`, `\ud83d\ude00`, `\ud800`, `\"`, `\\`, "abcdefgh", " "}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		checkScanAgrees(t, b)
	}
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		checkScanAgrees(t, b)
	}
}

// FuzzScanString: the single-pass scan and the reference agree on any
// input at any offset.
func FuzzScanString(f *testing.F) {
	f.Add([]byte(`abc\u00e9\ud83d\ude00"`))
	f.Add([]byte("caf\xc3\xa9\x01\""))
	f.Fuzz(func(t *testing.T, b []byte) { checkScanAgrees(t, b) })
}

// TestValidRunAgrees: validRun (32, 16 and 8 bytes at a time, then byte
// by byte) agrees with the bytewise rule (no control character, valid
// UTF-8) on runs of every length up to 140 with a control, non-ASCII or
// broken UTF-8 byte at every position.
func TestValidRunAgrees(t *testing.T) {
	ref := func(run []byte) bool {
		for _, c := range run {
			if c < 0x20 {
				return false
			}
		}
		return utf8.Valid(run)
	}
	odd := []string{"\x00", "\x1f", "\x7f", "\x80", "\x9f", "\xc2\x80", "\xc3\xa9", "\xc3", "\xa9", "\xe2\x82\xac", "\xed\xa0\x80", "\xf0\x9f\x98\x80", "\xff", " "}
	for n := 0; n <= 140; n++ {
		base := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789"), 4)[:n]
		if !validRun(base) {
			t.Fatalf("plain run of %d bytes refused", n)
		}
		for p := 0; p < n; p++ {
			for _, o := range odd {
				run := append(append(append([]byte(nil), base[:p]...), o...), base[p:]...)
				if got, want := validRun(run), ref(run); got != want {
					t.Fatalf("%q: %v, want %v", run, got, want)
				}
			}
		}
	}
}
