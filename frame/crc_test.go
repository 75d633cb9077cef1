package frame

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestChecksumIEEERandom: the frame checksum agrees with crc32.ChecksumIEEE on random
// bodies of random lengths (TestChecksumIEEE walks every length of one
// pattern).
func TestChecksumIEEERandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 1200)
	for range 5000 {
		n := rng.IntN(len(b))
		for i := range b[:n] {
			b[i] = byte(rng.Uint32())
		}
		if got, want := checksumIEEE(b[:n]), crc32.ChecksumIEEE(b[:n]); got != want {
			t.Fatalf("len %d: %08x, want %08x", n, got, want)
		}
	}
}

// TestAtCatchesEveryBitFlip: a single flipped bit anywhere in the body or
// the stored CRC of a frame, short (a consumer frame) or long (events with
// every tail length), makes At report ErrCRC, and so VerifySegment refuse
// the image.
func TestAtCatchesEveryBitFlip(t *testing.T) {
	frames := [][]byte{
		AppendConsumer(nil, KindAck, "c", 7),
		AppendConsumer(nil, KindConsumerCreate, "consumer-1", 0),
	}
	for n := 40; n < 60; n++ {
		frames = append(frames, AppendEvent(nil, 9, "e", "t", stringOfLen(n)))
	}
	for _, f := range frames {
		if _, _, err := At(f, 0); err != nil {
			t.Fatalf("intact frame %q: %v", f, err)
		}
		for bit := 8 * 8; bit < 8*len(f); bit++ {
			g := append([]byte(nil), f...)
			g[bit/8] ^= 1 << (bit % 8)
			if _, _, err := At(g, 0); err != ErrCRC {
				t.Fatalf("frame of %d bytes, bit %d flipped: %v, want ErrCRC", len(f), bit, err)
			}
			if _, err := VerifySegment(1, g, 0); err == nil {
				t.Fatalf("frame of %d bytes, bit %d flipped: VerifySegment accepted it", len(f), bit)
			}
		}
	}
}

func stringOfLen(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}
