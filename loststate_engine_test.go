package bucketlog

import (
	"crypto/sha256"
	"errors"
	"fmt"
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

// TestLostOnlySegmentStopsOpen (issue 12, finding 9; found by the
// simulation, seed 99): the store's only segment file is deleted. The directory still holds checkpoint.json
// (and bucket.json): it is a store that lost its files, not an empty
// directory to hydrate. Open must refuse with the store's own lost-state
// error, change nothing, and not serve a shorter log.
func TestLostOnlySegmentStopsOpen(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	root := t.TempDir()
	opts := Options{Dir: root, Bucket: b, NoBackground: true}
	l := mustOpen(t, opts)
	for i := range 3 {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dir := localseg.ShardDir(root, 0)
	if err := os.Remove(filepath.Join(dir, localseg.SegmentFileName(1))); err != nil {
		t.Fatal(err)
	}
	before := dirDigest(t, dir)
	l, err := Open(ctx, opts)
	if err == nil {
		tip := l.store.Tip()
		l.Close()
		t.Fatalf("Open over the lost only segment succeeded (tip %d of 3)", tip)
	}
	if Class(err) != ClassInvalidState || !errors.Is(err, localseg.ErrLostState) || !strings.Contains(err.Error(), "rebuild it from the bucket") {
		t.Fatalf("Open: %v (class %s), want localseg.ErrLostState (invalid_state) naming the rebuild from the bucket", err, Class(err))
	}
	if after := dirDigest(t, dir); after != before {
		t.Fatalf("the refused Open changed the shard directory:\nbefore %s\nafter  %s", before, after)
	}
}

// dirDigest names the files of dir with their contents (LOCK aside).
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%x ", e.Name(), sha256.Sum256(data))
	}
	return b.String()
}
