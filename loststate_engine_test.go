package bucketlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/inspect"
	"github.com/bucketlog/bucketlog/localseg"
)

// TestLostLocalSegmentStopsOpen (issue 12, finding 9): the highest segment
// file of a shipping store is deleted; Open refuses (invalid_state) naming
// the rebuild from the bucket instead of reusing the lost sequences, and
// inspect reports the problem.
func TestLostLocalSegmentStopsOpen(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	root := t.TempDir()
	opts := Options{Dir: root, Bucket: b, NoBackground: true, SegmentMaxBytes: 4096}
	l := mustOpen(t, opts)
	for i := range 30 {
		e := ev("1", i)
		e.Payload = strings.Repeat("x", 1000)
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dir := localseg.ShardDir(root, 0)
	var highest string
	for id := uint64(1); ; id++ {
		name := filepath.Join(dir, localseg.SegmentFileName(id))
		if _, err := os.Stat(name); err != nil {
			break
		}
		highest = name
	}
	if err := os.Remove(highest); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, opts)
	if err == nil {
		tip := l.store.Tip()
		l.Close()
		t.Fatalf("Open over a lost segment succeeded (tip %d of 30)", tip)
	}
	if Class(err) != ClassInvalidState || !strings.Contains(err.Error(), "rebuild it from the bucket") {
		t.Fatalf("Open: %v (class %s), want invalid_state naming the rebuild from the bucket", err, Class(err))
	}
	rep, err := inspect.Dir(ShardDir(root, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) == 0 {
		t.Fatalf("inspect reports no problem: %+v", rep)
	}
}
