package emulator_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// A stale disk whose last GC committed reclaim.json and was cut off
// before it unlinked the reclaimed segment files (a leftover below the
// reclaim base) is refused with the directory byte-identical: the leftover
// is removed only once the bucket's verdict lets the Open go on (issue 12
// finding 1; the simulation's seed 19735).
func TestRefusedOpenKeepsLeftoverSegments(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := ctxT(t)
			v := newEnv(t, be, false)
			execs := execsOf(0, 1, 3)
			root := t.TempDir()
			opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true}
			l := open(t, opts)
			appendN(t, l, execs, 0, 120, 1)
			if _, err := l.Ship(ctx, true); err != nil {
				t.Fatal(err)
			}
			dir := localseg.ShardDir(root, 0)
			id1 := segN(t, l, 1)
			first := filepath.Join(dir, localseg.SegmentFileName(id1))
			seg1, err := os.ReadFile(first)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := l.GC(ctx, bucketlog.GCRequest{MinRetainedSegments: 2, MaxRetainedSegments: 2})
			if err != nil || rep.Base <= 1 || rep.Local.ThroughSegment < id1 {
				t.Fatalf("gc: %+v %v (want segment 1 reclaimed)", rep, err)
			}
			closeLog(t, l)
			stale := t.TempDir()
			copyShard(t, root, stale, 0)
			// The unlink of segment 1 never happened on the copy.
			if err := os.WriteFile(filepath.Join(localseg.ShardDir(stale, 0), localseg.SegmentFileName(id1)), seg1, 0o644); err != nil {
				t.Fatal(err)
			}
			l = open(t, opts)
			appendN(t, l, execs, 120, 125, 1)
			if _, err := l.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			closeLog(t, l)
			if refusedIntact(t, v, stale, bucketlog.ErrStaleDisk) == nil {
				t.Fatal("a stale disk opened")
			}
			// Once the verdict lets it open, the leftover goes.
			copyShard(t, root, stale, 0)
			if err := os.WriteFile(filepath.Join(localseg.ShardDir(stale, 0), localseg.SegmentFileName(id1)), seg1, 0o644); err != nil {
				t.Fatal(err)
			}
			l = open(t, bucketlog.Options{Dir: stale, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true})
			if got := l.OpenReport().Store.LeftoversRemoved; !slices.Equal(got, []uint64{id1}) {
				t.Fatalf("OpenReport: leftovers removed %v, want [%d]", got, id1)
			}
			closeLog(t, l)
			if _, err := os.Stat(filepath.Join(localseg.ShardDir(stale, 0), localseg.SegmentFileName(id1))); !os.IsNotExist(err) {
				t.Fatalf("the leftover segment below the reclaim base is still there after an accepted Open: %v", err)
			}
		})
	}
}
