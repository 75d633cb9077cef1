package frame

import (
	"bytes"
	"errors"
	"testing"
)

// Fuzz targets for the codec; seed corpora are under testdata/fuzz/<target>/.

func FuzzDecodeFrame(f *testing.F) {
	for _, g := range goldenFrames {
		b, _ := Encode(nil, &g.frame)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, n, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if n < HeaderSize || n > len(data) {
			t.Fatalf("length %d of %d bytes", n, len(data))
		}
		body := data[HeaderSize:n]
		// The fast path, when it accepts, agrees with the fallback.
		if v, ok := ParseFast(body); ok {
			slow, err := DecodeBodySlow(body)
			if err != nil || slow != v.Frame(body) {
				t.Fatalf("fast %+v, slow %+v %v", v.Frame(body), slow, err)
			}
		}
		// Whatever decodes re-encodes to the same frame, and the
		// canonical encoding is a fixed point (decode, encode gives the
		// same bytes).
		again, err := Encode(nil, &fr)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", fr, err)
		}
		fr2, _, err := Decode(again)
		if err != nil || fr2 != fr {
			t.Fatalf("re-decoded %+v %v, want %+v", fr2, err, fr)
		}
		if third, _ := Encode(nil, &fr2); !bytes.Equal(third, again) {
			t.Fatalf("the canonical encoding is not stable:\n%q\n%q", again, third)
		}
	})
}
