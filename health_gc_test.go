package bucketlog

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// Finding 14a: a store poisoned inside GC's reclaim step makes the shard
// unready at once, not at the next append.
func TestGCReclaimPoisonMakesShardUnready(t *testing.T) {
	ctx := ctxT(t)
	inj := faultfs.NewToggle(faultfs.Fail(faultfs.Errno(syscall.EIO),
		faultfs.And(faultfs.Kinds(faultfs.OpSync), faultfs.PathContains("reclaim"))), false)
	l := mustOpen(t, Options{Dir: t.TempDir(), SegmentMaxBytes: 1024, FS: faultfs.Wrap(localseg.OSFS{}, inj), Logger: quiet()})
	defer l.Close()
	for i := 1; i <= 60; i++ {
		if _, err := l.Append(ctx, ev("5", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Pull(ctx, "r", 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "r", l.store.Tip()); err != nil {
		t.Fatal(err)
	}
	inj.On()
	_, err := l.GC(ctx, GCRequest{})
	if !errors.Is(err, localseg.ErrPoisoned) {
		t.Fatalf("GC with the manifest fsync failing: %v", err)
	}
	if ready, why := l.Health(); ready || !strings.Contains(why, "poisoned") {
		t.Fatalf("health after a poisoned reclaim: %v %q", ready, why)
	}
}

// Finding 14a on a shipping shard: the periodic GC of the maintenance loop
// (which only logs its error) poisons the store; readiness sees it.
func TestPeriodicSharedGCPoisonMakesShardUnready(t *testing.T) {
	ctx := ctxT(t)
	_, b := s3FaultBucket(t)
	inj := faultfs.NewToggle(faultfs.Fail(faultfs.Errno(syscall.EIO),
		faultfs.And(faultfs.Kinds(faultfs.OpSync), faultfs.PathContains("reclaim"))), false)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 1024,
		FS: faultfs.Wrap(localseg.OSFS{}, inj), GC: GCOptions{Enabled: true}, Logger: quiet()})
	defer l.Close()
	for i := 1; i <= 60; i++ {
		if _, err := l.Append(ctx, ev("5", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Pull(ctx, "r", 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "r", l.store.Tip()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	inj.On()
	if err := l.ship.Maintain(ctx, true); err != nil {
		t.Logf("maintenance pass: %v", err)
	}
	if ready, why := l.Health(); ready || !strings.Contains(why, "poisoned") {
		t.Fatalf("health after a poisoned periodic reclaim: %v %q", ready, why)
	}
}
