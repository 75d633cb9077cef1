package emulator_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// Scenario 5 (CHECKLIST §3.5, 3.11): Open with a bucket refuses a stale
// disk (behind the bucket, by a tail object or by a sealed segment) and a
// diverged one (another history in a sealed segment or in the unsealed
// tail), changing nothing on it; an empty disk hydrates from the bucket and
// continues the sequence; an empty disk over an empty bucket opens empty.
func TestOpenAgainstTheBucket(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Run("stale_by_tail", func(t *testing.T) { staleByTail(t, be) })
			t.Run("stale_by_segment", func(t *testing.T) { staleBySegment(t, be) })
			t.Run("diverged_segment", func(t *testing.T) { divergedSegment(t, be) })
			t.Run("diverged_tail", func(t *testing.T) { divergedTail(t, be) })
			t.Run("empty_disk_hydrates", func(t *testing.T) { emptyDiskHydrates(t, be) })
			t.Run("empty_disk_empty_bucket", func(t *testing.T) { emptyBucket(t, be) })
		})
	}
}

// refused opens root with the bucket, expects want, and checks the store's
// files did not change.
func refused(t *testing.T, v *env, root string, want error) {
	t.Helper()
	before := shardFiles(t, root)
	_, err := bucketlog.Open(ctxT(t), bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true, Logger: quietLogger(t)})
	if !errors.Is(err, want) || bucketlog.Class(err) != bucketlog.ClassInvalidState {
		t.Fatalf("Open: %v, want %v (class invalid_state)", err, want)
	}
	t.Logf("refused: %v", err)
	if after := shardFiles(t, root); !maps.EqualFunc(before, after, func(a, b string) bool { return a == b }) {
		t.Fatalf("a refused Open changed the store's files")
	}
}

// shardFiles maps the segment files and manifests of shard 0 to their
// contents.
func shardFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	dir := localseg.ShardDir(root, 0)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.Name() == "LOCK" || e.Name() == "checkpoint.json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func staleByTail(t *testing.T, be backend) {
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	execs := execsOf(0, 1, 3)
	root := t.TempDir()
	opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true}
	l := open(t, opts)
	appendN(t, l, execs, 0, 3, 1)
	closeLog(t, l)
	stale := t.TempDir()
	copyShard(t, root, stale, 0) // a backup of the disk as it is now
	l = open(t, opts)
	appendN(t, l, execs, 3, 6, 1)
	if rep, err := l.Ship(ctx, false); err != nil || rep.ShippedThrough != 6 {
		t.Fatalf("ship: %+v %v", rep, err)
	}
	closeLog(t, l)
	refused(t, v, stale, bucketlog.ErrStaleDisk)
}

func staleBySegment(t *testing.T, be backend) {
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	execs := execsOf(0, 1, 3)
	root := t.TempDir()
	opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true, DisableTailReplication: true}
	l := open(t, opts)
	appendN(t, l, execs, 0, 20, 1)
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, execs, 20, 30, 1)
	closeLog(t, l)
	// The backup holds segment 1 (durable) and segment 2 active with 10
	// events; tail replication is off, so the bucket knows them only once
	// segment 2 is sealed and uploaded.
	stale := t.TempDir()
	copyShard(t, root, stale, 0)
	l = open(t, opts)
	if rep, err := l.Ship(ctx, true); err != nil || rep.Upload.Uploaded != 1 {
		t.Fatalf("ship: %+v %v", rep, err)
	}
	closeLog(t, l)
	refused(t, v, stale, bucketlog.ErrStaleDisk)
}

// otherHistory writes n events that differ from the workload's into a
// local-only store under a new root, sealing the active segment when seal.
func otherHistory(t *testing.T, n int, seal bool) string {
	t.Helper()
	root := t.TempDir()
	l := open(t, bucketlog.Options{Dir: root, SegmentMaxBytes: 4096})
	appendN(t, l, execsOf(0, 1, 20)[10:], 0, n, 1)
	if seal {
		if _, err := l.Store().Seal(); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	return root
}

func divergedSegment(t *testing.T, be backend) {
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	l := open(t, bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true})
	appendN(t, l, execsOf(0, 1, 3), 0, 20, 1)
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	first := segN(t, l, 1) // the writer's start segment: the other history's segments take its ids
	closeLog(t, l)
	refused(t, v, otherHistoryAt(t, 20, true, first), bucketlog.ErrDiverged)
}

func divergedTail(t *testing.T, be backend) {
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	l := open(t, bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true})
	appendN(t, l, execsOf(0, 1, 3), 0, 5, 1)
	if rep, err := l.Ship(ctx, false); err != nil || rep.TailBatches != 1 {
		t.Fatalf("ship: %+v %v", rep, err)
	}
	closeLog(t, l)
	// Ahead of the bucket (6 > 5), so not stale: it disagrees on 1..5.
	refused(t, v, otherHistory(t, 6, false), bucketlog.ErrDiverged)
}

func emptyDiskHydrates(t *testing.T, be backend) {
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	execs := execsOf(0, 1, 5)
	l := open(t, bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true})
	want := appendN(t, l, execs, 0, 300, 5)
	if _, err := l.Pull(ctx, "c1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "c1", 123); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l) // ships sealed segments and the tail
	root := t.TempDir()
	h := open(t, bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true})
	or := h.OpenReport()
	if !or.Hydrated || or.Hydrate == nil || or.Hydrate.LastSeq != 300 || or.Hydrate.TailRecords == 0 || or.Hydrate.Segments == 0 {
		t.Fatalf("open of an empty disk: %+v (hydrate %+v)", or, or.Hydrate)
	}
	sameRecords(t, "hydrated", scanAll(t, h).Records, want)
	if c := snapshot(t, h).Consumers; !maps.Equal(c, map[string]uint64{"c1": 123}) {
		t.Fatalf("hydrated consumers %v", c)
	}
	res := appendN(t, h, execs, 300, 301, 1)
	if res[0].Seq != 301 {
		t.Fatalf("append after hydration got %d", res[0].Seq)
	}
	if _, err := h.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	closeLog(t, h)
	// Reopening the hydrated disk is neither stale nor diverged.
	closeLog(t, open(t, bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true}))
}

func emptyBucket(t *testing.T, be backend) {
	v := newEnv(t, be, false)
	l := open(t, bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, NoBackground: true})
	if or := l.OpenReport(); or.Hydrated || or.BucketTip != 0 {
		t.Fatalf("open over an empty bucket: %+v", or)
	}
	if p := scanAll(t, l); p.Exists || len(p.Records) != 0 {
		t.Fatalf("scan of a new shard: %+v", p)
	}
	if res := appendN(t, l, execsOf(0, 1, 1), 0, 1, 1); res[0].Seq != 1 {
		t.Fatalf("first append got %d", res[0].Seq)
	}
	closeLog(t, l)
}
