package localseg_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// Benchmarks. Ratios are meant to be read within one run:
//
//	go test ./localseg -run '^$' -bench 'Append|FdatasyncLoop' -benchtime 3s
//
// BenchmarkFdatasyncLoop is the baseline: positional writes of one frame's
// size and an fdatasync each, on a plain growing file, on a file
// preallocated with fallocate, and on one preallocated by writing zeros
// (what the store does). BenchmarkAppend is the store; its single-writer
// appends/s compare with the loops, and 8 or 64 writers show group commit.

type countObserver struct{ fsyncs atomic.Int64 }

func (o *countObserver) Fsync(time.Duration)         { o.fsyncs.Add(1) }
func (o *countObserver) Sealed(localseg.SegmentInfo) {}

func benchEvent(size, i int) localseg.Event {
	p := strings.Repeat("x", size)
	return localseg.Event{ExecutionID: fmt.Sprint(320816801799737344 + i%10000), TransactionID: fmt.Sprintf("txn-%d", i), Payload: p}
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{256, 4096} {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("size=%d/writers=%d", size, writers), func(b *testing.B) {
				obs := &countObserver{}
				s, err := localseg.Open(b.TempDir(), localseg.Options{Observer: obs})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ev := benchEvent(size, 0)
				// Distinct transaction ids, more of them than the window
				// holds, so every append is written (a repeated id is a
				// retry, which writes nothing), without allocating in the loop.
				txns := benchTxnIDs()
				var next atomic.Int64
				nextEv := func() localseg.Event {
					e := ev
					e.TransactionID = txns[int(next.Add(1))%len(txns)]
					return e
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				start := time.Now()
				n := 0
				if writers == 1 {
					for b.Loop() {
						if _, err := s.Append(nextEv()); err != nil {
							b.Fatal(err)
						}
						n++
					}
				} else {
					tokens := make(chan struct{}, writers)
					var wg sync.WaitGroup
					var failed atomic.Value
					for range writers {
						wg.Go(func() {
							for range tokens {
								if _, err := s.Append(nextEv()); err != nil {
									failed.Store(err)
								}
							}
						})
					}
					for b.Loop() {
						tokens <- struct{}{}
						n++
					}
					close(tokens)
					wg.Wait()
					if err := failed.Load(); err != nil {
						b.Fatal(err)
					}
				}
				el := time.Since(start)
				b.ReportMetric(float64(n)/el.Seconds(), "appends/s")
				b.ReportMetric(float64(obs.fsyncs.Load())/float64(n), "fsyncs/append")
			})
		}
	}
}

// benchTxnIDs are more distinct transaction ids than the default window.
func benchTxnIDs() []string {
	ids := make([]string, localseg.DefaultTransactionWindow+1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("txn-%d", i)
	}
	return ids
}

func BenchmarkFdatasyncLoop(b *testing.B) {
	const segBytes = localseg.DefaultSegmentMaxBytes
	for _, size := range []int{256, 4096} {
		frame := size + 100 // about the frame of a payload of size bytes
		for _, mode := range []string{"none", "fallocate", "zeros"} {
			b.Run(fmt.Sprintf("size=%d/prealloc=%s", size, mode), func(b *testing.B) {
				dir := b.TempDir()
				var f localseg.File
				var off int64
				id := 0
				next := func() {
					if f != nil {
						f.Close()
					}
					id++
					var err error
					f, err = localseg.OSFS{}.OpenFile(filepath.Join(dir, fmt.Sprint(id)), os.O_RDWR|os.O_CREATE, 0o644)
					if err != nil {
						b.Fatal(err)
					}
					switch mode {
					case "fallocate":
						err = f.Allocate(0, segBytes)
					case "zeros":
						z := make([]byte, 1<<20)
						for o := int64(0); o < segBytes && err == nil; o += int64(len(z)) {
							_, err = f.WriteAt(z, o)
						}
					}
					if err == nil {
						err = f.Sync()
					}
					if err != nil {
						b.Fatal(err)
					}
					off = 0
				}
				next()
				buf := []byte(strings.Repeat("y", frame))
				b.SetBytes(int64(size))
				start := time.Now()
				n := 0
				for b.Loop() {
					if off+int64(frame) > segBytes {
						next()
					}
					if _, err := f.WriteAt(buf, off); err != nil {
						b.Fatal(err)
					}
					if err := f.Datasync(); err != nil {
						b.Fatal(err)
					}
					off += int64(frame)
					n++
				}
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "appends/s")
				f.Close()
			})
		}
	}
}

// benchStores caches the stores the open and replay benchmarks read, so
// the million-event one is built once per process.
var benchStores struct {
	sync.Mutex
	dirs map[int]string
	root string
}

func benchStore(b *testing.B, events int) string {
	b.Helper()
	benchStores.Lock()
	defer benchStores.Unlock()
	if d, ok := benchStores.dirs[events]; ok {
		return d
	}
	if benchStores.root == "" {
		var err error
		if benchStores.root, err = os.MkdirTemp("", "localseg-bench-"); err != nil {
			b.Fatal(err)
		}
		benchStores.dirs = map[int]string{}
	}
	dir := filepath.Join(benchStores.root, fmt.Sprint(events))
	s, err := localseg.Open(dir, localseg.Options{})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 10000
	evs := make([]localseg.Event, 0, batch)
	for i := 0; i < events; i++ {
		evs = append(evs, benchEvent(256, i))
		if len(evs) == batch || i == events-1 {
			if _, _, err := s.AppendBatch(evs); err != nil {
				b.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	benchStores.dirs[events] = dir
	return dir
}

func cleanupBenchStores() {
	benchStores.Lock()
	defer benchStores.Unlock()
	if benchStores.root != "" {
		os.RemoveAll(benchStores.root)
	}
}

// withoutCheckpoint returns a directory holding dir's segments (hard
// links) and no checkpoint: an open of it replays.
func withoutCheckpoint(b *testing.B, dir string) string {
	b.Helper()
	out := b.TempDir()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "seg-") {
			if err := os.Link(filepath.Join(dir, e.Name()), filepath.Join(out, e.Name())); err != nil {
				b.Fatal(err)
			}
		}
	}
	return out
}

var benchSizes = []struct {
	name   string
	events int
}{{"1k", 1000}, {"1M", 1_000_000}}

// BenchmarkOpen: a writable open and close with a trusted checkpoint (no
// replay: O(1) in the log's length), and a read-only open without one
// (a full replay, which also builds the read index).
func BenchmarkOpen(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run("events="+sz.name+"/mode=checkpoint", func(b *testing.B) {
			dir := benchStore(b, sz.events)
			for b.Loop() {
				s, err := localseg.Open(dir, localseg.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if s.OpenReport().Replayed {
					b.Fatal("replayed")
				}
				s.Close()
			}
		})
		b.Run("events="+sz.name+"/mode=replay", func(b *testing.B) {
			dir := withoutCheckpoint(b, benchStore(b, sz.events))
			for b.Loop() {
				s, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}

// BenchmarkReplay: open with a trusted checkpoint, then the first read,
// which replays every frame (CRC, gapless check) to build the index. It
// reports the index's size per event.
func BenchmarkReplay(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run("events="+sz.name, func(b *testing.B) {
			dir := benchStore(b, sz.events)
			var perEvent float64
			b.SetBytes(int64(sz.events) * 256)
			for b.Loop() {
				s, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Scan(0, 1); err != nil {
					b.Fatal(err)
				}
				perEvent = float64(s.IndexBytes()) / float64(sz.events)
				s.Close()
			}
			b.ReportMetric(perEvent, "index-B/event")
		})
	}
}

// BenchmarkScanAll: open (trusted checkpoint), then read every event in
// pages of 1000: the index build plus decoding every record.
func BenchmarkScanAll(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run("events="+sz.name, func(b *testing.B) {
			dir := benchStore(b, sz.events)
			b.SetBytes(int64(sz.events) * 256)
			for b.Loop() {
				s, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				if n := scanEvery(b, s, 1000); n != sz.events {
					b.Fatalf("%d records", n)
				}
				s.Close()
			}
		})
	}
}
