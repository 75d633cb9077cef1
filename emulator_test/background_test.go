package emulator_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// Scenario 6: the engine as a service runs it. Opened by bucket URL with
// its background tasks (50 ms tail tick, uploads on every seal, cleanup),
// eight goroutines append concurrently over 4 KiB segments. Without any
// explicit Ship the bucket catches up with the tip; after Close the bucket
// alone restores every event exactly once, gapless, each goroutine's events
// in the order it appended them. goleak (TestMain) checks that Close
// stopped every goroutine.
func TestBackgroundShipping(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) { background(t, be) })
	}
}

const (
	bgWriters   = 8
	bgPerWriter = 150
)

func background(t *testing.T, be backend) {
	start := time.Now()
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	if e, ok := v.emu.(interface{ Env() map[string]string }); ok {
		for k, val := range e.Env() {
			t.Setenv(k, val)
		}
	}
	root := t.TempDir()
	l := open(t, bucketlog.Options{Dir: root, BucketURL: v.emu.URL(bucketName), SegmentMaxBytes: 4096, TailInterval: 50 * time.Millisecond})
	execs := execsOf(0, 1, 16)

	recs := make([][]localseg.Record, bgWriters)
	var wg sync.WaitGroup
	errs := make(chan error, bgWriters)
	for w := range bgWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range bgPerWriter {
				e := event(execs, w*10000+i)
				e.TransactionID = fmt.Sprintf("w%d-%d", w, i)
				res, err := l.Append(ctx, e)
				if err != nil {
					errs <- err
					return
				}
				recs[w] = append(recs[w], localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = bgWriters * bgPerWriter
	var want []localseg.Record
	for w, rs := range recs {
		for i := 1; i < len(rs); i++ {
			if rs[i].Seq <= rs[i-1].Seq {
				t.Fatalf("writer %d: sequence %d after %d", w, rs[i].Seq, rs[i-1].Seq)
			}
		}
		want = append(want, rs...)
	}
	slices.SortFunc(want, func(a, b localseg.Record) int { return int(a.Seq) - int(b.Seq) })
	for i, r := range want {
		if r.Seq != uint64(i+1) {
			t.Fatalf("acknowledged sequences are not 1..%d: position %d holds %d", total, i, r.Seq)
		}
	}
	sameRecords(t, "local", scanAll(t, l).Records, want)

	// The background tasks alone bring the bucket to the tip: every sealed
	// segment uploaded, the cursor object at the tip (hang guard only).
	var segs []blobtier.ObjectInfo
	var sealed int64
	var nSealed int
	for deadline := time.Now().Add(time.Minute); ; {
		sealed, nSealed = sealedBytes(snapshot(t, l))
		segs = objects(t, v.b, 0, blobtier.KindSegment)
		c, _, err := tailbatch.ReadCursor(ctx, v.b, 0)
		if err != nil && !errors.Is(err, blobtier.ErrNotFound) {
			t.Fatal(err)
		}
		if len(segs) == nSealed && c.ShippedThrough == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background shipping did not catch up: %d of %d sealed segments, shipped through %d of %d", len(segs), nSealed, c.ShippedThrough, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if totalSize(segs) != sealed || nSealed < 20 {
		t.Fatalf("%d sealed segments of %d bytes; the bucket holds %d bytes", nSealed, sealed, totalSize(segs))
	}
	// While the writer is alive, the bucket alone already has everything.
	live, _ := restore(t, v.b, 0, bucketlog.RestoreOptions{})
	sameRecords(t, "restore while running", readOnlyRecords(t, live, 0, 1).Records, want)

	closeLog(t, l)
	destroy(t, root)
	root2, rr := restore(t, v.b, 0, bucketlog.RestoreOptions{})
	sameRecords(t, "restore after Close", readOnlyRecords(t, root2, 0, 1).Records, want)
	figures(t, start, "writers=%d events=%d sealed_segments=%d sealed_bytes=%d segment_objects=%d tail_records_restored=%d",
		bgWriters, total, nSealed, sealed, len(segs), rr.TailRecords)
}
