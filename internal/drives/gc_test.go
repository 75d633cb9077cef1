package drives

// The GC drives (CHECKLIST §5.9, §6.2), moved here from reclaim.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
)

// gcsBucket is a CAS-capable bucket on an in-process fake-gcs-server,
// closed with the test.
func gcsBucket(t *testing.T) blobtier.Bucket {
	t.Helper()
	e, err := emulator.StartGCS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBucket("drives"); err != nil {
		t.Fatal(err)
	}
	bb, err := e.OpenBucket(context.Background(), "drives")
	if err != nil {
		t.Fatal(err)
	}
	b := blobtier.New(bb, blobtier.Options{Timeout: time.Minute})
	t.Cleanup(func() { b.Close() })
	if !b.CanCAS() {
		t.Fatal("the emulated bucket cannot compare-and-swap")
	}
	return b
}

func TestDriveGCHolds(t *testing.T) { // §5.9
	for _, tc := range []struct {
		events int
		segMax int64
		min    int
	}{{40, 220, 2}, {40, 0, 0}, {200, 1024, 3}} {
		t.Run(fmt.Sprintf("events=%d/seg=%d/min=%d", tc.events, tc.segMax, tc.min), func(t *testing.T) {
			rep, err := DriveGC(filepath.Join(t.TempDir(), "gc"), tc.events, tc.segMax, tc.min, "")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Holds() || !rep.GCHolds {
				t.Fatalf("drive does not hold: %+v (%s)", rep.Report, orString(rep.Report.Divergence, ""))
			}
			t.Logf("%d → %d segments at %d (%s)", rep.Report.SegmentsBefore, rep.Report.SegmentsAfter,
				rep.Report.ReclaimedThroughSeq, rep.Report.PlanReason)
		})
	}
}

func TestDriveGCRefuses(t *testing.T) { // §5.9
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		root   string
		events int
		segMax int64
		min    int
	}{
		{"too few events", filepath.Join(t.TempDir(), "a"), MinGCDriveEvents - 1, 0, 0},
		{"no events", filepath.Join(t.TempDir(), "b"), 0, 0, 0},
		{"too many events", filepath.Join(t.TempDir(), "c"), MaxGCDriveEvents + 1, 0, 0},
		{"segment too large", filepath.Join(t.TempDir(), "d"), 40, localseg.MaxSegmentBytes + 1, 0},
		{"negative floor", filepath.Join(t.TempDir(), "e"), 40, 0, -1},
		{"empty root", "", 40, 0, 0},
		{"non-empty root", nonEmpty, 40, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DriveGC(tc.root, tc.events, tc.segMax, tc.min, "")
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("err = %v, want ErrUsage", err)
			}
		})
	}
}

func TestDriveSharedGCHolds(t *testing.T) { // §6.2
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			rep, err := DriveSharedGC(filepath.Join(t.TempDir(), "drive"), n, s3Bucket(t))
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Holds() || !rep.SharedGCHolds {
				t.Fatalf("drive does not hold: %+v (%s)", rep.Report, orString(rep.Report.Divergence, ""))
			}
			t.Logf("pruned %d → %d segment objects at watermark %d/%d (%s)", rep.Report.SharedObjectsBefore,
				rep.Report.SharedObjectsAfter, rep.Report.WatermarkSeq, rep.Report.WatermarkSegment, rep.Report.PlanReason)
		})
	}
}

func TestDriveSharedGCRefuses(t *testing.T) { // §6.2
	b := s3Bucket(t)
	for _, n := range []int{-1, 0, 1, MaxSharedGCDriveShards + 1} {
		if _, err := DriveSharedGC(filepath.Join(t.TempDir(), "d"), n, b); !errors.Is(err, ErrUsage) {
			t.Fatalf("%d shards: %v, want ErrUsage", n, err)
		}
	}
	if _, err := DriveSharedGC(filepath.Join(t.TempDir(), "d"), 2, nil); !errors.Is(err, ErrUsage) {
		t.Fatalf("nil bucket: %v", err)
	}
	mem := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer mem.Close()
	if _, err := DriveSharedGC(filepath.Join(t.TempDir(), "d"), 2, mem); !errors.Is(err, reclaim.ErrSharedUnsupported) {
		t.Fatalf("memblob: %v, want reclaim.ErrSharedUnsupported", err)
	}
}

func TestDriveSharedGCOnGCS(t *testing.T) { // §6.2
	rep, err := DriveSharedGC(filepath.Join(t.TempDir(), "drive"), 2, gcsBucket(t))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Holds() {
		t.Fatalf("drive does not hold: %+v (%s)", rep.Report, orString(rep.Report.Divergence, ""))
	}
}
