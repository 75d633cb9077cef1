package frame

import (
	"fmt"
	"strings"
	"testing"
)

// verifyBenchSegment builds a segment image of about size bytes of event
// frames as restore sees them: payloads of 256 bytes on average, short
// identifiers (~370-byte frames).
func verifyBenchSegment(size int) (buf []byte, first uint64) {
	payload := strings.Repeat("0123456789abcdef", 17)
	first = 1_000_000
	for seq := first; len(buf) < size; seq++ {
		exec := fmt.Sprintf("e%05d", seq%97)
		txn := fmt.Sprintf("t%06x", seq&0xffffff)
		// 248 to 263 bytes (256 on average): every CRC tail length.
		buf = AppendEvent(buf, seq, exec, txn, payload[:248+seq%16])
	}
	return buf, first
}

// BenchmarkVerifySegment measures VerifySegment (magic, length, CRC, JSON,
// sequence run) over a 16 MiB segment image; SetBytes makes it report MB/s.
func BenchmarkVerifySegment(b *testing.B) {
	buf, first := verifyBenchSegment(16 << 20)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := VerifySegment(1, buf, first); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyCRC and BenchmarkVerifyParse split the per-frame cost:
// the header and CRC check (At) and the body's validation (ParseFast).
func BenchmarkVerifyCRC(b *testing.B) {
	buf, _ := verifyBenchSegment(16 << 20)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for o := 0; o < len(buf); {
			n, _, err := At(buf, o)
			if err != nil {
				b.Fatal(err)
			}
			o += n
		}
	}
}

func BenchmarkVerifyParse(b *testing.B) {
	buf, _ := verifyBenchSegment(16 << 20)
	var bodies [][]byte
	for o := 0; o < len(buf); {
		n, body, _ := At(buf, o)
		bodies = append(bodies, body)
		o += n
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for _, body := range bodies {
			if _, ok := ParseFast(body); !ok {
				b.Fatal("not canonical")
			}
		}
	}
}

// BenchmarkVerifierChunks is BenchmarkVerifySegment fed as a GET's reads
// feed it (the bytes so far every 256 KiB, then Finish).
func BenchmarkVerifierChunks(b *testing.B) {
	buf, first := verifyBenchSegment(16 << 20)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		v := NewVerifier(1, first)
		for k := 256 << 10; k < len(buf); k += 256 << 10 {
			v.Advance(buf[:k])
		}
		if _, err := v.Finish(buf); err != nil {
			b.Fatal(err)
		}
	}
}
