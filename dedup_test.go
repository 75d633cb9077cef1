package bucketlog

import (
	"context"
	"testing"
)

// mustBeDuplicate retries e and requires the original outcome at seq.
func mustBeDuplicate(t *testing.T, ctx context.Context, l *Log, e Event, seq uint64, what string) {
	t.Helper()
	r, err := l.Append(ctx, e)
	if err != nil || !r.Duplicate || r.Seq != seq {
		t.Fatalf("%s: retry of %s: %+v %v, want the duplicate of %d", what, e.TransactionID, r, err, seq)
	}
}

// Retry-safe appends survive GC (keep-last-N), the loss of the disk (a
// hydrate from the bucket: segments and tail objects) and a restore: the
// window is rebuilt from the newest retained frames wherever they came from.
func TestDedupAcrossGCHydrateRestore(t *testing.T) {
	ctx := ctxT(t)
	b := s3Bucket(t) // shared GC needs compare-and-swap
	o := Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 1024}
	l := mustOpen(t, o)
	for i := 1; i <= 60; i++ {
		if r, err := l.Append(ctx, ev("1", i)); err != nil || r.Seq != uint64(i) {
			t.Fatalf("append %d: %+v %v", i, r, err)
		}
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	gc, err := l.GC(ctx, GCRequest{MinRetainedSegments: 2, MaxRetainedSegments: 3})
	base := gc.Local.ThroughSeq
	if err != nil || base == 0 || base >= 55 {
		t.Fatalf("gc: %+v %v", gc, err)
	}
	mustBeDuplicate(t, ctx, l, ev("1", 60), 60, "after GC")
	mustBeDuplicate(t, ctx, l, ev("1", int(base)+1), base+1, "after GC")
	// A reclaimed event's id is forgotten (documented): written anew.
	if r, err := l.Append(ctx, ev("1", int(base))); err != nil || r.Duplicate || r.Seq != 61 {
		t.Fatalf("retry of reclaimed %d: %+v %v", base, r, err)
	}
	// Events that reach the bucket only as a tail object.
	for i := 62; i <= 64; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log, what string) {
		t.Helper()
		mustBeDuplicate(t, ctx, l, ev("1", int(base)+1), base+1, what)
		mustBeDuplicate(t, ctx, l, ev("1", 60), 60, what)
		mustBeDuplicate(t, ctx, l, ev("1", int(base)), 61, what)
		mustBeDuplicate(t, ctx, l, ev("1", 64), 64, what)
		if p, err := l.Scan(ctx, 0, 1000); err != nil || p.RecordCount != 64-base {
			t.Fatalf("%s: %d records %v, want %d", what, p.RecordCount, err, 64-base)
		}
	}

	// The disk is lost: a new directory hydrates from the bucket.
	o.Dir = t.TempDir()
	l = mustOpen(t, o)
	if !l.OpenReport().Hydrated {
		t.Fatal("not hydrated")
	}
	check(l, "hydrated")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	dst := t.TempDir()
	if _, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst}); err != nil {
		t.Fatal(err)
	}
	o.Dir = dst
	l = mustOpen(t, o)
	defer l.Close()
	check(l, "restored")
}
