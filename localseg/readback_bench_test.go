package localseg_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scanEvery reads every record of s once in pages of page, checking each
// payload's length, and returns how many it read.
func scanEvery(b *testing.B, s *localseg.Store, page int) int {
	n := 0
	for after := uint64(0); ; {
		p, err := s.Scan(after, page)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Records) == 0 {
			return n
		}
		for i := range p.Records {
			if len(p.Records[i].Payload) != 256 {
				b.Fatalf("seq %d: payload of %d bytes", p.Records[i].Seq, len(p.Records[i].Payload))
			}
		}
		n += len(p.Records)
		after = p.Records[len(p.Records)-1].Seq
	}
}

// BenchmarkReadBack is BenchmarkScanAll the way the bench harness reads
// (pages of 10000 after a writable open) and also reports the CPU time an
// open and read-back costs: on a shared machine the wall time of a run
// depends on the other jobs, its CPU time much less.
func BenchmarkReadBack(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run("events="+sz.name, func(b *testing.B) {
			dir := benchStore(b, sz.events)
			b.SetBytes(int64(sz.events) * 256)
			cpu0 := cpuTime(b)
			for b.Loop() {
				s, err := localseg.Open(dir, localseg.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if n := scanEvery(b, s, 10000); n != sz.events {
					b.Fatalf("%d records", n)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// BenchmarkScanPass is the read-back alone: the index is built before the
// timer starts, and each op reads every record once in pages of 10000.
func BenchmarkScanPass(b *testing.B) {
	dir := benchStore(b, 1_000_000)
	s, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Scan(0, 1); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1_000_000 * 256)
	cpu0 := cpuTime(b)
	for b.Loop() {
		if n := scanEvery(b, s, 10000); n != 1_000_000 {
			b.Fatalf("%d records", n)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}
