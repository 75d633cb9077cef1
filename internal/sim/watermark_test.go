package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// The watermark check accepts a damaged mark repaired lower only when the
// bucket still holds everything above it (repairedLower): a lower mark
// below objects GC deleted is a violation, damaged before or not.
func TestWatermarkRepairedBelowAGapIsAViolation(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		ctx := context.Background()
		r := &run{seed: 1, m: newModel(), known: map[int]bool{}, stats: NewStats(), pulled: map[string]uint64{},
			undeliv: map[string]bool{}, damaged: map[string]string{}, ruleOf: map[int]faultbucket.Rule{}, wmFired: map[int]int{}}
		r.w = newWorld(tempDir(t), 1, false)
		if v, err := r.reopen(ctx, "first"); v != nil || err != nil {
			t.Fatal(v, err)
		}
		for i := range 40 {
			ev := localseg.Event{ExecutionID: "ex-1", TransactionID: fmt.Sprintf("tx-%d", i), Payload: fmt.Sprintf("p1-%d=%s", i, strings.Repeat("x", 300))}
			r.m.sent[ev.Payload] = event{ev.ExecutionID, ev.TransactionID, ev.Payload}
			if _, err := r.w.log.Append(ctx, ev); err != nil {
				t.Fatal(err)
			}
			if i%8 == 7 {
				if _, err := r.w.log.Ship(ctx, true); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := r.w.log.GC(ctx, bucketlog.GCRequest{MinRetainedSegments: 2, MaxRetainedSegments: 2, Sweep: true}); err != nil {
			t.Fatal(err)
		}
		if v := r.check(ctx); v != nil {
			t.Fatal(v)
		}
		if r.m.wm == 0 {
			t.Fatal("setup: GC committed no watermark")
		}
		if err := r.w.bkt.Put(ctx, blobtier.WatermarkKey(0), watermark.Mark{V: 1 << 50}.Encode()); err != nil {
			t.Fatal(err)
		}
		r.wmDamaged = damaged
		v := r.check(ctx)
		if v == nil || v.check != "watermark-backward" {
			t.Fatalf("damaged=%v: a mark lowered to 0 below deleted objects passed the check: %v", damaged, v)
		}
		r.w.close()
	}
}
