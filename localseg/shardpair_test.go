package localseg_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestShardPairIsRecordedAndChecked (issue 12, finding 13): a store written
// as shard 0 of 1 is refused as shard 0 of 2 (or as another index), writable
// or read-only, before anything changes; a store without a record adopts
// the pair of its first writable open.
func TestShardPairIsRecordedAndChecked(t *testing.T) {
	one := localseg.ShardPair{Index: 0, Count: 1}
	dir := filepath.Join(t.TempDir(), "shard-0000")
	s := openT(t, dir, localseg.Options{Shard: one})
	mustAppend(t, s, evt("e", 1))
	closeT(t, s)
	if _, err := os.Stat(filepath.Join(dir, "shard.json")); err != nil {
		t.Fatalf("the new store records no shard pair: %v", err)
	}
	before := snapshotDir(t, dir)
	for _, bad := range []localseg.ShardPair{{Index: 0, Count: 2}, {Index: 1, Count: 2}} {
		for _, ro := range []bool{false, true} {
			s, err := localseg.Open(dir, localseg.Options{Shard: bad, ReadOnly: ro})
			if err == nil {
				s.Close()
				t.Fatalf("%v read-only=%v: opened a store written as %v", bad, ro, one)
			}
			if !errors.Is(err, localseg.ErrShardMismatch) {
				t.Fatalf("%v read-only=%v: %v, want ErrShardMismatch", bad, ro, err)
			}
			if after := snapshotDir(t, dir); !equalDirs(before, after) {
				t.Fatalf("%v read-only=%v: the refused open changed the directory", bad, ro)
			}
		}
	}
	closeT(t, openT(t, dir, localseg.Options{Shard: one}))
	closeT(t, openT(t, dir, localseg.Options{})) // not told a pair: not checked

	// An older store without a record adopts the first writable pair.
	old := filepath.Join(t.TempDir(), "shard-0000")
	s = openT(t, old, localseg.Options{})
	mustAppend(t, s, evt("e", 1))
	closeT(t, s)
	if _, err := os.Stat(filepath.Join(old, "shard.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a store opened without a pair wrote a record: %v", err)
	}
	ro, err := localseg.Open(old, localseg.Options{Shard: localseg.ShardPair{Index: 0, Count: 2}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()
	if _, err := os.Stat(filepath.Join(old, "shard.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only open wrote a record: %v", err)
	}
	closeT(t, openT(t, old, localseg.Options{Shard: localseg.ShardPair{Index: 0, Count: 2}}))
	if _, err := localseg.Open(old, localseg.Options{Shard: one}); !errors.Is(err, localseg.ErrShardMismatch) {
		t.Fatalf("after adopting 0 of 2: open as 0 of 1: %v, want ErrShardMismatch", err)
	}

	// A damaged record is corruption, not a silent re-adoption.
	if err := os.WriteFile(filepath.Join(old, "shard.json"), []byte(`{"shard_index":0,"shard_count":1,"crc32":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := localseg.Open(old, localseg.Options{Shard: one}); !errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("open over a damaged shard.json: %v, want ErrCorrupt", err)
	}
}
