package bucketlog

import (
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// An empty directory whose bucket fails its first requests is hydrated
// once the bucket answers (the start-up retry policy of the reconcile
// check), not refused at once; a bucket that keeps failing is given up on
// after StartupTimeout, not before.
func TestHydrateRetriesTransientBucketErrors(t *testing.T) {
	ctx := ctxT(t)
	fb, b := s3FaultBucket(t)
	src := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Logger: quiet()})
	for i := 1; i <= 5; i++ {
		if _, err := src.Append(ctx, ev("5", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	src.Close()

	fb.MustAdd(faultbucket.Rule{Kind: faultbucket.Refuse, Times: 4})
	l, err := Open(ctx, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, StartupTimeout: time.Minute, Logger: quiet()})
	if err != nil {
		t.Fatalf("hydration with the bucket failing 4 requests, then answering: %v", err)
	}
	if !l.OpenReport().Hydrated || l.Store().Tip() != 5 {
		t.Fatalf("hydrated %v, tip %d; want 5 events", l.OpenReport().Hydrated, l.Store().Tip())
	}
	l.Close()

	fb.Clear()
	fb.MustAdd(faultbucket.Rule{Kind: faultbucket.Refuse})
	const timeout = 400 * time.Millisecond
	start := time.Now()
	if _, err := Open(ctx, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, StartupTimeout: timeout, Logger: quiet()}); err == nil {
		t.Fatal("hydration with the bucket always failing succeeded")
	}
	if took := time.Since(start); took < timeout/2 {
		t.Fatalf("gave up after %v, before half the start-up timeout %v", took, timeout)
	}
}
