package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// verifyImage is a segment image with every kind of frame: consumer
// frames, canonical events, an event whose body is valid JSON in another
// layout (DecodeBodySlow's path), escapes, a frame longer than the chunks
// the tests cut it into.
func verifyImage(t testing.TB) (img []byte, first uint64) {
	first = 41
	img, _ = Encode(img, &Frame{Kind: KindConsumerCreate, Consumer: "c"})
	seq := first
	event := func(payload string) {
		var err error
		img, err = Encode(img, &Frame{Kind: KindEvent, Seq: seq, ExecutionID: "e" + fmt.Sprint(seq%3), TransactionID: "t", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		seq++
	}
	event("a")
	event(`quote " and \ and é`)
	// Another layout of an event: spaces, fields reordered.
	body := fmt.Sprintf(`{ "Event" : {"payload":"x","global_sequence": %d, "transaction_id":"t","execution_id":"e"} }`, seq)
	img = appendRawFrame(img, []byte(body))
	seq++
	img, _ = Encode(img, &Frame{Kind: KindAck, Consumer: "c", Seq: first})
	event(strings.Repeat("p", 300))
	event("b")
	img, _ = Encode(img, &Frame{Kind: KindConsumerDelete, Consumer: "c"})
	event("c")
	return img, first
}

// appendRawFrame appends a frame of body with a correct header.
func appendRawFrame(dst, body []byte) []byte {
	var h [HeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], Magic)
	binary.LittleEndian.PutUint32(h[4:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[8:], checksumIEEE(body))
	return append(append(dst, h[:]...), body...)
}

// sameResult reports how two (summary, error) results differ, "" when
// they agree: the same summary, and errors alike in text (segment, offset,
// cause), in the sentinels they wrap and in their CorruptionError.
func sameResult(s1 SegmentSummary, e1 error, s2 SegmentSummary, e2 error) string {
	if s1 != s2 {
		return fmt.Sprintf("summary %+v, want %+v", s1, s2)
	}
	if (e1 == nil) != (e2 == nil) {
		return fmt.Sprintf("error %v, want %v", e1, e2)
	}
	if e1 == nil {
		return ""
	}
	if e1.Error() != e2.Error() {
		return fmt.Sprintf("error %q, want %q", e1, e2)
	}
	var c1, c2 *CorruptionError
	if !errors.As(e1, &c1) || !errors.As(e2, &c2) || c1.Segment != c2.Segment || c1.Offset != c2.Offset {
		return fmt.Sprintf("corruption %+v, want %+v", c1, c2)
	}
	for _, s := range []error{ErrCorrupt, ErrShortHeader, ErrZeroHeader, ErrBadMagic, ErrBodyTooLong, ErrShortBody, ErrEmptyBody, ErrCRC, ErrBadBody, ErrSeqGap} {
		if errors.Is(e1, s) != errors.Is(e2, s) {
			return fmt.Sprintf("errors.Is(%v) differs: %v against %v", s, e1, e2)
		}
	}
	return ""
}

// verifyChunked feeds b to a Verifier as a GET's reads would: the bytes so
// far after each of the pieces cuts (ascending lengths) gives, then Finish.
func verifyChunked(seg uint64, b []byte, first uint64, cuts []int) (SegmentSummary, error) {
	v := NewVerifier(seg, first)
	for _, k := range cuts {
		v.Advance(b[:k])
	}
	return v.Finish(b)
}

// stepCuts cuts n bytes into pieces of step bytes.
func stepCuts(n, step int) []int {
	var cuts []int
	for k := 0; k < n; k += step {
		cuts = append(cuts, k)
	}
	return append(cuts, n)
}

func randCuts(r *rand.Rand, n int) []int {
	var cuts []int
	for k := 0; k < n; k += 1 + r.IntN(64) {
		cuts = append(cuts, k)
	}
	return cuts
}

// checkAgrees holds the Verifier to VerifySegment on b, cut every way the
// tests cut: one byte at a time, in header-sized and odd steps, at random,
// whole, and in two at every cut point (the intact image; damaged ones at
// eight random points).
func checkAgrees(t *testing.T, name string, b []byte, first uint64, r *rand.Rand) {
	t.Helper()
	want, werr := VerifySegment(7, b, first)
	check := func(how string, cuts []int) {
		t.Helper()
		got, gerr := verifyChunked(7, b, first, cuts)
		if d := sameResult(got, gerr, want, werr); d != "" {
			t.Fatalf("%s, first %d, %s: %s", name, first, how, d)
		}
	}
	for _, step := range []int{1, 3, 11, 12, 13, 64, 100, 4096} {
		check(fmt.Sprintf("steps of %d", step), stepCuts(len(b), step))
	}
	check("random pieces", randCuts(r, len(b)))
	check("no Advance", nil)
	check("one Advance of everything", []int{len(b)})
	if werr == nil {
		for k := 0; k <= len(b); k++ {
			check(fmt.Sprintf("one cut at %d", k), []int{k})
		}
		return
	}
	for range 8 {
		k := r.IntN(len(b) + 1)
		check(fmt.Sprintf("one cut at %d", k), []int{k})
	}
}

// TestVerifierAgreesWithVerifySegment: a valid image and every damage at
// every offset (cut there, a bit flipped there, zeros from there, a byte
// inserted there), with the right, a wrong and no first sequence: the
// Verifier returns what VerifySegment does, fed in any pieces.
func TestVerifierAgreesWithVerifySegment(t *testing.T) {
	img, first := verifyImage(t)
	r := rand.New(rand.NewPCG(1, 2))
	if _, err := VerifySegment(7, img, first); err != nil {
		t.Fatalf("the test image does not verify: %v", err)
	}
	firsts := []uint64{first, 0, first + 1}
	for _, f := range firsts {
		checkAgrees(t, "intact", img, f, r)
		checkAgrees(t, "empty", nil, f, r)
	}
	kinds := map[string]int{}
	for i := 0; i <= len(img); i++ {
		f := firsts[i%len(firsts)]
		checkAgrees(t, fmt.Sprintf("cut at %d", i), img[:i], f, r)
		if i == len(img) {
			break
		}
		for _, bit := range []byte{0x01, 0x80} {
			b := append([]byte(nil), img...)
			b[i] ^= bit
			checkAgrees(t, fmt.Sprintf("bit %#x flipped at %d", bit, i), b, f, r)
			if _, err := VerifySegment(7, b, f); err != nil {
				kinds[classOf(err)]++
			}
		}
		z := append([]byte(nil), img...)
		clear(z[i:])
		checkAgrees(t, fmt.Sprintf("zeros from %d", i), z, f, r)
		ins := append(append(append([]byte(nil), img[:i]...), 0xE5), img[i:]...)
		checkAgrees(t, fmt.Sprintf("a byte inserted at %d", i), ins, f, r)
	}
	// The table reached every check but the body's (a flipped bit is
	// caught by the CRC first: TestVerifierAgreesOnBadBodies has those).
	for _, k := range []string{"magic", "length", "crc", "seq"} {
		if kinds[k] == 0 {
			t.Errorf("no flipped bit failed by %s: %v", k, kinds)
		}
	}
}

// classOf names the check an error comes from.
func classOf(err error) string {
	switch {
	case errors.Is(err, ErrBadMagic), errors.Is(err, ErrZeroHeader):
		return "magic"
	case errors.Is(err, ErrBodyTooLong), errors.Is(err, ErrShortBody), errors.Is(err, ErrEmptyBody), errors.Is(err, ErrShortHeader):
		return "length"
	case errors.Is(err, ErrCRC):
		return "crc"
	case errors.Is(err, ErrBadBody):
		return "body"
	case errors.Is(err, ErrSeqGap):
		return "seq"
	}
	return err.Error()
}

// Frames whose CRC is right but whose body or sequence is not: the body
// and sequence checks are reached (a flipped bit mostly stops at the CRC).
func TestVerifierAgreesOnBadBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	good, _ := Encode(nil, &Frame{Kind: KindEvent, Seq: 5, ExecutionID: "e", TransactionID: "t", Payload: "p"})
	cases := map[string][][]byte{
		"not JSON":       {good, []byte("not json")},
		"unknown":        {good, []byte(`{"Other":{}}`)},
		"invalid UTF-8":  {good, []byte("{\"Event\":{\"global_sequence\":6,\"execution_id\":\"\xff\",\"transaction_id\":\"t\",\"payload\":\"p\"}}")},
		"sequence gap":   {good, []byte(`{"Event":{"global_sequence":9,"execution_id":"e","transaction_id":"t","payload":"p"}}`)},
		"sequence again": {good, []byte(`{"Event":{"global_sequence":5,"execution_id":"e","transaction_id":"t","payload":"p"}}`)},
		"overflow":       {[]byte(`{"Event":{"global_sequence":18446744073709551615,"execution_id":"e","transaction_id":"t","payload":"p"}}`)},
	}
	for name, parts := range cases {
		var b []byte
		for i, p := range parts {
			if i == 0 && name != "overflow" {
				b = append(b, p...)
				continue
			}
			b = appendRawFrame(b, p)
		}
		// And a valid frame after it, which must never be reached.
		b = append(b, good...)
		for _, f := range []uint64{0, 5} {
			if _, err := VerifySegment(7, b, f); err == nil && name != "sequence gap" {
				t.Fatalf("%s: VerifySegment accepted it", name)
			}
			checkAgrees(t, name, b, f, r)
		}
	}
}

// Reset starts over: bytes seen before it count for nothing, and a Finish
// with an image shorter than what Advance saw checks all of it.
func TestVerifierReset(t *testing.T) {
	img, first := verifyImage(t)
	want, werr := VerifySegment(7, img, first)
	v := NewVerifier(7, first)
	v.Advance([]byte("garbage, then a Reset: a replaced object read again"))
	v.Reset()
	for k := 0; k <= len(img); k += 5 {
		v.Advance(img[:k])
	}
	if got, err := v.Finish(img); sameResult(got, err, want, werr) != "" {
		t.Fatalf("after Reset: %s", sameResult(got, err, want, werr))
	}
	v = NewVerifier(7, first)
	v.Advance(img)
	short := img[:len(img)/2]
	ws, we := VerifySegment(7, short, first)
	if got, err := v.Finish(short); sameResult(got, err, ws, we) != "" {
		t.Fatalf("a shorter image: %s", sameResult(got, err, ws, we))
	}
	// An error seen by Advance is Finish's, and stops Advance.
	bad := append([]byte(nil), img...)
	bad[HeaderSize+2] ^= 1
	v = NewVerifier(7, first)
	v.Advance(bad)
	v.Advance(bad)
	ws, we = VerifySegment(7, bad, first)
	if got, err := v.Finish(bad); we == nil || sameResult(got, err, ws, we) != "" {
		t.Fatalf("a damaged image: %v, %s", we, sameResult(got, err, ws, we))
	}
}

// A frame is checked as soon as its bytes are present, not at Finish:
// what makes the checks overlap a download.
func TestVerifierChecksFramesAsTheyArrive(t *testing.T) {
	img, first := verifyImage(t)
	n, _, _ := At(img, 0)
	bad := append([]byte(nil), img...)
	bad[n+HeaderSize] ^= 1 // the second frame's body
	n2, _, _ := At(img, n)
	v := NewVerifier(7, first)
	v.Advance(bad[:n+n2-1])
	if v.err != nil || v.off != n {
		t.Fatalf("a frame one byte short: err %v, checked through %d, want %d", v.err, v.off, n)
	}
	v.Advance(bad[:n+n2])
	if !errors.Is(v.err, ErrCRC) {
		t.Fatalf("the whole second frame present: err %v, want a CRC mismatch", v.err)
	}
	// A bad header fails as soon as its 12 bytes are present.
	hdr := append([]byte(nil), img...)
	hdr[n] = 0
	v = NewVerifier(7, first)
	v.Advance(hdr[:n+HeaderSize])
	if !errors.Is(v.err, ErrBadMagic) {
		t.Fatalf("a bad magic: %v", v.err)
	}
}

// FuzzVerifier: on any bytes, cut anywhere, the Verifier and
// VerifySegment agree.
func FuzzVerifier(f *testing.F) {
	img, first := verifyImage(f)
	f.Add(img, first, uint16(1), uint16(0))
	f.Add(img, uint64(0), uint16(13), uint16(100))
	f.Add(img[:len(img)-3], first, uint16(37), uint16(5))
	for _, g := range goldenFrames {
		b, _ := Encode(nil, &g.frame)
		f.Add(b, uint64(1), uint16(12), uint16(40))
	}
	f.Fuzz(func(t *testing.T, b []byte, first uint64, step, cut uint16) {
		want, werr := VerifySegment(3, b, first)
		s := max(int(step), 1)
		var cuts []int
		if int(cut) <= len(b) {
			cuts = append(cuts, int(cut))
		}
		for k := int(cut) + s; k <= len(b); k += s {
			cuts = append(cuts, k)
		}
		got, gerr := verifyChunked(3, b, first, cuts)
		if d := sameResult(got, gerr, want, werr); d != "" {
			t.Fatalf("step %d from %d: %s", s, cut, d)
		}
		got, gerr = verifyChunked(3, b, first, stepCuts(len(b), 1))
		if d := sameResult(got, gerr, want, werr); d != "" {
			t.Fatalf("a byte at a time: %s", d)
		}
	})
}
