package tailbatch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// sealRecorder is a localseg.Observer that queues sealed segments for the
// simulated uploader.
type sealRecorder struct {
	mu     sync.Mutex
	sealed []localseg.SegmentInfo
}

func (r *sealRecorder) Fsync(time.Duration) {}
func (r *sealRecorder) Sealed(info localseg.SegmentInfo) {
	r.mu.Lock()
	r.sealed = append(r.sealed, info)
	r.mu.Unlock()
}

func (r *sealRecorder) take() []localseg.SegmentInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sealed
	r.sealed = nil
	return out
}

// BenchmarkPutAmplification measures what shipping costs the bucket: bytes
// put (sealed segments, tail objects and cursor objects) per byte appended,
// and tail puts and cursor writes per tick. One iteration is one append; a
// tick (Replicate) runs every `tick` appends; segments seal at 64 KiB, and
// the simulated uploader puts each sealed segment and calls Advance before
// the next tick, as the engine does. The store lives on faultfs.MemFS, since
// what is measured is bytes, not fsync latency.
//
// Targets: amplification ≤ 2.1 (each byte once in a segment, once in a tail
// object, plus the cursor objects), tail puts per tick ≤ 1 while a tick
// ships less than 8 MiB, and one cursor write per tick that shipped. Events
// that seal before a tick ships them go up once only (Advance), so long
// ticks come out below 2. tick=1 shows the floor of the other extreme: the
// cursor object (about 60 bytes) then weighs on every small event.
func BenchmarkPutAmplification(b *testing.B) {
	for _, payload := range []int{100, 1000} {
		for _, tick := range []int{1, 10, 100, 1000} {
			b.Run(fmt.Sprintf("payload=%d/tick=%d", payload, tick), func(b *testing.B) {
				benchAmplification(b, payload, tick)
			})
		}
	}
}

func benchAmplification(b *testing.B, payload, tick int) {
	ctx := context.Background()
	var up atomic.Int64
	var tailPuts, cursorWrites, segPuts atomic.Int64
	bucket := blobtier.Observe(newMemBucket(b), func(op blobtier.Op, res blobtier.Result, bytesUp, _ int64) {
		if res == blobtier.ResultOK {
			up.Add(bytesUp)
		}
	})
	counting := newTestBucket(bucket)
	seals := &sealRecorder{}
	s := openStoreIn(b, "/bench/shard-0000", localseg.Options{
		FS:              faultfs.NewMemFS(),
		SegmentMaxBytes: 64 << 10,
		Observer:        seals,
	})
	r := tailbatch.New(0, 0, tailbatch.Options{})
	pad := strings.Repeat("p", payload)
	ticks := 0
	tickNow := func() {
		for _, info := range seals.take() {
			data, err := s.ReadSegment(info.ID)
			if err != nil {
				b.Fatal(err)
			}
			if err := counting.PutIfAbsent(ctx, blobtier.SegmentKey(0, info.ID), data, 0); err != nil {
				b.Fatal(err)
			}
			segPuts.Add(1)
			r.Advance(info.LastSeq)
		}
		before := counting.count(opPutIfAbsent)
		res, err := r.Replicate(ctx, s, counting)
		if err != nil {
			b.Fatal(err)
		}
		tailPuts.Add(int64(counting.count(opPutIfAbsent) - before))
		if res.CursorWritten {
			cursorWrites.Add(1)
		}
		if res.Batches > 0 {
			ticks++
		}
	}
	n := 0
	for b.Loop() {
		if _, err := s.Append(event(n+1, pad)); err != nil {
			b.Fatal(err)
		}
		n++
		if n%tick == 0 {
			tickNow()
		}
	}
	tickNow()
	snap, err := s.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	var appended int64
	for _, seg := range snap.Segments {
		appended += seg.Size
	}
	if r.ShippedThrough() != snap.Tip {
		b.Fatalf("shipped %d of %d", r.ShippedThrough(), snap.Tip)
	}
	b.SetBytes(appended / int64(max(n, 1)))
	b.ReportMetric(float64(up.Load())/float64(appended), "put-bytes/appended-byte")
	if ticks > 0 {
		b.ReportMetric(float64(tailPuts.Load())/float64(ticks), "tail-puts/tick")
		b.ReportMetric(float64(cursorWrites.Load())/float64(ticks), "cursor-writes/tick")
	}
	b.ReportMetric(float64(segPuts.Load()), "segments")
}
