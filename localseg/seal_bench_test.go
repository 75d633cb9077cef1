package localseg_test

import (
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// BenchmarkSeal is one append and one seal an iteration, on the real disk:
// the seal's cost (truncate, fsync, index file, successor, directory fsync,
// checkpoint) over an append's.
//
//	go test ./localseg -run '^$' -bench Seal -count=5
func BenchmarkSeal(b *testing.B) {
	s := openT(b, b.TempDir(), localseg.Options{SegmentMaxBytes: 1 << 20})
	defer s.Close()
	ev := benchEvent(200, 0)
	b.ResetTimer()
	for i := range b.N {
		ev.TransactionID = benchEvent(0, i).TransactionID
		if _, err := s.Append(ev); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Seal(); err != nil {
			b.Fatal(err)
		}
	}
}
