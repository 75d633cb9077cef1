package reclaim

import (
	"fmt"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// BenchmarkReclaim measures one GC pass (snapshot, plan, local reclaim)
// that removes the same number of segments from stores with different
// histories. Most of the history was reclaimed before the timer starts, so
// both stores retain the same set; a pass should cost what the retained set
// costs, not what the history does (target: history=100000 within 1.3× of
// history=10000).
//
// Each iteration first appends passSegments segments' worth of events and
// moves the consumer forward by as much (untimed), then runs the pass.
//
// fs=mem runs on faultfs.MemFS, where a pass costs its CPU and memory work
// only (fsync is free), so the comparison between histories is not drowned
// by the disk's fsync latency; fs=disk is the real cost on this machine.
func BenchmarkReclaim(b *testing.B) {
	for _, fsName := range []string{"mem", "disk"} {
		for _, history := range []int{10000, 100000} {
			b.Run(fmt.Sprintf("fs=%s/history=%d", fsName, history), func(b *testing.B) {
				benchReclaim(b, fsName, history)
			})
		}
	}
}

func benchReclaim(b *testing.B, fsName string, history int) {
	const (
		segBytes     = 4096
		batch        = 500
		passSegments = 8
		keepSegments = 24
	)
	opts := localseg.Options{SegmentMaxBytes: segBytes}
	dir := b.TempDir()
	if fsName == "mem" {
		opts.FS = newMachine(b)
		dir = crashDir
	}
	{
		{
			st, err := localseg.Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			evs := testEvents(batch)
			appendN := func(n int) {
				for n > 0 {
					k := min(n, batch)
					if _, _, err := st.AppendBatch(evs[:k]); err != nil {
						b.Fatal(err)
					}
					n -= k
				}
			}
			appendN(history)
			snap, err := st.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			perSeg := max(1, int(snap.Tip)/len(snap.Segments))
			if _, err := st.Pull("bench", 1); err != nil {
				b.Fatal(err)
			}
			retain := uint64(keepSegments * perSeg)
			if _, err := st.Ack("bench", snap.Tip-retain); err != nil {
				b.Fatal(err)
			}
			pol := Policy{Enabled: true}
			if _, _, err := Pass(st, pol, nil); err != nil {
				b.Fatal(err)
			}
			removed := 0
			for b.Loop() {
				b.StopTimer()
				appendN(passSegments * perSeg)
				tip := st.Tip()
				if _, err := st.Ack("bench", tip-retain); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				_, res, err := Pass(st, pol, nil)
				if err != nil {
					b.Fatal(err)
				}
				removed += len(res.Removed)
			}
			b.ReportMetric(float64(removed)/float64(b.N), "segments/op")
			after, _ := st.Snapshot()
			b.ReportMetric(float64(len(after.Segments)), "retained-segments")
		}
	}
}
