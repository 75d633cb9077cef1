package emulator_test

import (
	"testing"

	"github.com/bucketlog/bucketlog"
)

// segN is the id of the n-th segment (1-based) of a writer that has not
// reclaimed yet: on a bucket that fences, its ids start at its cut's
// start_segment (the store's segment-id jump, docs/FORMAT.md §3.12), else
// at 1.
func segN(t *testing.T, l *bucketlog.Log, n uint64) uint64 {
	t.Helper()
	snap, err := l.Store().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap.Segments[0].ID + n - 1
}

// otherHistoryAt is otherHistory with its segment ids from first on (the
// store jumps there before its first append), so its segments meet the
// bucket's under the same ids.
func otherHistoryAt(t *testing.T, n int, seal bool, first uint64) string {
	t.Helper()
	root := t.TempDir()
	l := open(t, bucketlog.Options{Dir: root, SegmentMaxBytes: 4096})
	if err := l.Store().JumpTo(first); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, execsOf(0, 1, 20)[10:], 0, n, 1)
	if seal {
		if _, err := l.Store().Seal(); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	return root
}
