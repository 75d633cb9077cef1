package bucketlog

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// A failed cursor object write is counted (cursor_write_failed_total), and
// the next successful pass leaves the counter where it was.
func TestCursorWriteFailedIsCounted(t *testing.T) {
	ctx := ctxT(t)
	fb, b := s3FaultBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
	defer l.Close()
	if _, err := l.Append(ctx, ev("1", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Pull(ctx, "c", 1); err != nil {
		t.Fatal(err)
	}
	rule := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal, Key: "noetl.ehdb.cur.*"})
	if _, err := l.Ship(ctx, false); err == nil {
		t.Fatal("a pass whose cursor write failed reported no error")
	}
	if got := testutil.ToFloat64(l.m.CursorWriteFailed); got != 1 {
		t.Fatalf("cursor_write_failed_total = %v after a refused cursor write, want 1", got)
	}
	fb.Remove(rule)
	if _, err := l.Append(ctx, ev("1", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(l.m.CursorWriteFailed); got != 1 {
		t.Fatalf("cursor_write_failed_total = %v after a good pass, want 1", got)
	}
}
