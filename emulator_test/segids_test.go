package emulator_test

import (
	"testing"

	"github.com/bucketlog/bucketlog"
)

// segN is the id of the n-th segment (1-based) of a writer that has not
// reclaimed yet: on a bucket that fences, its ids start at its cut's
// start_segment (the store's segment-id jump, docs/FORMAT.md §3.11), else
// at 1.
func segN(t *testing.T, l *bucketlog.Log, n uint64) uint64 {
	t.Helper()
	snap, err := l.Store().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap.Segments[0].ID + n - 1
}
