package emulator_test

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// TestLazyTakeoverAppendsAtOnce: a new owner on a lazily restored directory
// (S3 emulator): the restore downloads only the newest segments within the
// budget, records the older ones as evicted and reports what stays remote;
// the owner's open fetches only what its transaction window needs, appends
// and ships without fetching a remote segment, and every old event reads
// back byte for byte through a per-execution read first, then scan, pulls
// and the stream.
func TestLazyTakeoverAppendsAtOnce(t *testing.T) {
	v := newEnv(t, backends[0], true)
	execs, want, _ := lazyHistory(t, v)
	all := len(objects(t, v.b, 0, blobtier.KindSegment))
	g := &getCounter{Bucket: v.b, segs: map[string]int{}}
	opts := bucketlog.Options{Dir: t.TempDir(), Bucket: g, SegmentMaxBytes: evictSegMax, NoBackground: true,
		LocalRetentionBytes: evictBudget, RemoteCacheBytes: 64 << 10, TransactionWindow: 100}
	r, err := bucketlog.Restore(ctxT(t), bucketlog.RestoreOptions{Bucket: g, Dir: opts.Dir, LazyBytes: evictBudget})
	if err != nil {
		t.Fatal(err)
	}
	rep := &r
	l := open(t, opts)
	if rep == nil || rep.Lazy == nil || rep.Lazy.FullBecause != "" || rep.Lazy.RemoteSegments == 0 {
		t.Fatalf("the open did not hydrate lazily: %+v", rep)
	}
	lz := rep.Lazy
	t.Logf("hydrated %d segment objects (%d bytes) of %d; %d remote (%d bytes, from event %d on local)",
		rep.Segments, rep.SegmentBytes, all, lz.RemoteSegments, lz.RemoteBytes, lz.FirstLocalSeq)
	if rep.SegmentBytes > evictBudget+evictSegMax || rep.Segments+lz.RemoteSegments != all {
		t.Fatalf("%d segments (%d bytes) local and %d remote of %d", rep.Segments, rep.SegmentBytes, lz.RemoteSegments, all)
	}
	// The hydrate's downloads, and the owner's open: the restore learned
	// every remote segment's first event from a ranged read of its head
	// (coldload lazyfirst.go), so the open fetches no remote segment.
	remote := func() int { return g.between(lz.RemoteFirstSegment, lz.RemoteLastSegment) }
	atOpen := remote()
	if n := g.count(); n > rep.Segments || atOpen != 0 || lz.FirstsKnown != lz.RemoteSegments || g.ranges < lz.RemoteSegments {
		t.Fatalf("the lazy takeover fetched %d segment objects (%d remote, %d ranged reads, %d firsts known); %d are local, %d remote",
			n, atOpen, g.ranges, lz.FirstsKnown, rep.Segments, lz.RemoteSegments)
	}
	ctx := ctxT(t)
	c0, _, err := tailbatch.ReadCursor(ctx, v.b, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, end := len(want), len(want)+50; i < end; i++ {
		e := evictEvent(execs, i)
		res, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := remote() - atOpen; n != 0 {
		t.Fatalf("appending and shipping fetched %d remote segment objects", n)
	}
	// The owner's start read every segment's range: the cursor object
	// moves forward only (with the ranges unknown it was rebuilt lower).
	if c, _, err := tailbatch.ReadCursor(ctx, v.b, 0); err != nil || c.ShippedThrough < c0.ShippedThrough || c.ShippedThrough != want[len(want)-1].Seq {
		t.Fatalf("shipped_through %d after the owner's open (%v), %d before it, the tip is %d", c.ShippedThrough, err, c0.ShippedThrough, want[len(want)-1].Seq)
	}
	res, err := l.ReadExecution(ctx, execs[0], 0, len(want))
	if err != nil {
		t.Fatal(err)
	}
	var w []localseg.Record
	for _, r := range want {
		if r.ExecutionID == execs[0] {
			w = append(w, r)
		}
	}
	sameRecords(t, "a first per-execution read", res.Page.Records, w)
	readAllBack(t, l, execs, want)
	closeLog(t, l)
}

// TestLazyRestore: `restore --lazy` (bucketlog.Restore with LazyBytes)
// reports what it downloaded and what stays remote, the restored store
// reads everything back; a refused lazy restore (a target that holds a
// store, a bucket failing during it) changes no byte of the target.
func TestLazyRestore(t *testing.T) {
	v := newEnv(t, backends[0], true)
	execs, want, _ := lazyHistory(t, v)
	ctx := ctxT(t)
	root := t.TempDir()
	// The bucket fails the metadata read of the oldest segment: refused,
	// and the target stays as it was (absent).
	segs := objects(t, v.b, 0, blobtier.KindSegment)
	rule := v.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpStat, Kind: faultbucket.Refuse, Key: segs[0].Key})
	_, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: v.b, Dir: root, LazyBytes: evictBudget})
	v.fb.Remove(rule)
	if err == nil {
		t.Fatal("a lazy restore with the bucket failing succeeded")
	}
	if names, _ := os.ReadDir(root); len(names) != 0 && !onlyHydrateLocks(names) {
		t.Fatalf("a refused restore left %v", names)
	}
	rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: v.b, Dir: root, LazyBytes: evictBudget})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lazy == nil || rep.Lazy.FullBecause != "" || rep.Lazy.RemoteSegments == 0 || rep.Lazy.Budget != evictBudget {
		t.Fatalf("restore --lazy report: %+v", rep.Lazy)
	}
	t.Logf("restore --lazy: %d segments local (%d bytes), %d remote (%d bytes), %d metadata reads, first local event %d",
		rep.Segments, rep.SegmentBytes, rep.Lazy.RemoteSegments, rep.Lazy.RemoteBytes, rep.Lazy.Stats, rep.Lazy.FirstLocalSeq)
	before := treeSum(t, root)
	if _, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: v.b, Dir: root, LazyBytes: evictBudget}); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("a lazy restore over a store: %v, want an invalid state", err)
	}
	if treeSum(t, root) != before {
		t.Fatal("a refused restore changed the target")
	}
	l := open(t, bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true, LocalRetentionBytes: evictBudget})
	readAllBack(t, l, execs, want)
	closeLog(t, l)
}

// between counts the GETs of shard 0's segment objects lo..hi.
func (g *getCounter) between(lo, hi uint64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for id := lo; id <= hi; id++ {
		n += g.segs[blobtier.SegmentKey(0, id)]
	}
	return n
}

func onlyHydrateLocks(names []os.DirEntry) bool {
	for _, n := range names {
		if filepath.Ext(n.Name()) != ".lock" {
			return false
		}
	}
	return true
}

// treeSum hashes every file's name and bytes under dir.
func treeSum(t *testing.T, dir string) [32]byte {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		h.Write([]byte(p))
		h.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}
