package localseg_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// txBenchOpts: 1 MiB segments, so a million events are ~300 segments.
var txBenchOpts = localseg.Options{SegmentMaxBytes: 1 << 20, NoPreallocate: true}

// txBenchStore builds a store of events 256-byte events with distinct
// transaction ids.
func txBenchStore(b *testing.B, events int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "shard")
	s, err := localseg.Open(dir, txBenchOpts)
	if err != nil {
		b.Fatal(err)
	}
	p := strings.Repeat("x", 256)
	evs := make([]localseg.Event, 0, 10000)
	for i := range events {
		evs = append(evs, localseg.Event{ExecutionID: fmt.Sprint(i % 1000), TransactionID: fmt.Sprintf("txn-%d", i), Payload: p})
		if len(evs) == cap(evs) || i == events-1 {
			if _, _, err := s.AppendBatch(evs); err != nil {
				b.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkOpenTxWindow: a writable open (trusted checkpoint) and close of
// a store of many segments, without the transaction window and with the
// default one, which reads the newest frames back until it holds 100,000
// events: its cost is bounded by the window, not the log (compare
// events=100k with events=1M).
func BenchmarkOpenTxWindow(b *testing.B) {
	for _, events := range []int{100_000, 1_000_000} {
		dir := txBenchStore(b, events)
		for _, w := range []struct {
			name string
			n    int
		}{{"off", -1}, {"default", 0}} {
			b.Run(fmt.Sprintf("events=%dk/window=%s", events/1000, w.name), func(b *testing.B) {
				o := txBenchOpts
				o.TransactionWindow = w.n
				for b.Loop() {
					s, err := localseg.Open(dir, o)
					if err != nil {
						b.Fatal(err)
					}
					if s.OpenReport().Replayed {
						b.Fatal("replayed")
					}
					if n := localseg.TxWindowLenForTest(s); (w.n < 0) != (n == 0) {
						b.Fatalf("window holds %d", n)
					}
					s.Close()
				}
			})
		}
	}
}
