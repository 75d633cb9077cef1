package bucketlog

import (
	"strings"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// An append whose fsync succeeded and whose checkpoint write failed is
// acknowledged (finding 3) and poisons the store for the next one; the
// shard is unready at once, not at the next append (found by
// internal/sim, seed 158: the check of tail-stalled read the shard ready
// while its store was poisoned).
func TestLatePoisonMakesShardUnready(t *testing.T) {
	ctx := ctxT(t)
	inj := faultfs.NewToggle(faultfs.Fail(faultfs.Errno(syscall.EIO),
		faultfs.And(faultfs.Kinds(faultfs.OpWrite), faultfs.PathContains("checkpoint"))), false)
	l := mustOpen(t, Options{Dir: t.TempDir(), FS: faultfs.Wrap(localseg.OSFS{}, inj), Logger: quiet()})
	defer l.Close()
	if _, err := l.Append(ctx, ev("5", 1)); err != nil {
		t.Fatal(err)
	}
	inj.On()
	if _, err := l.Append(ctx, ev("5", 2)); err != nil {
		t.Fatalf("an append whose fsync succeeded failed: %v", err)
	}
	inj.Off()
	if ready, why := l.Health(); ready || !strings.Contains(why, "poisoned") {
		t.Fatalf("health after a late poison: %v %q", ready, why)
	}
}
