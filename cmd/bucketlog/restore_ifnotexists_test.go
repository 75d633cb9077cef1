package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestRestoreIfNotExistsTakesAnyStore: --if-not-exists skips every
// directory that restore itself refuses as already holding a store
// (localseg.IsStore), a store that lost its segment files and kept its
// checkpoint included, and changes nothing in it.
func TestRestoreIfNotExistsTakesAnyStore(t *testing.T) {
	root := t.TempDir()
	bucket := "file://" + filepath.Join(root, "bucket")
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "src")
	for i := range 3 {
		ok(t, nil, "append", "--dir", src, "--bucket", bucket, "--execution-id", strconv.Itoa(i), "--transaction-id", "t"+strconv.Itoa(i), "--payload", "p")
	}
	ok(t, nil, "ship", "--dir", src, "--bucket", bucket, "--seal-active")
	dst := filepath.Join(root, "dst")
	ok(t, nil, "restore", "--bucket", bucket, "--dir", dst, "--shard", "0")
	// A writable open and a seal leave the store's own files (the
	// checkpoint, segment indexes) beside the segments.
	ok(t, nil, "append", "--dir", dst, "--bucket", bucket, "--execution-id", "9", "--transaction-id", "t9", "--payload", "p")
	ok(t, nil, "ship", "--dir", dst, "--bucket", bucket, "--seal-active")
	shard := localseg.ShardDir(dst, 0)
	entries, err := os.ReadDir(shard)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "seg-") || n == "reclaim.json" {
			if err := os.Remove(filepath.Join(shard, e.Name())); err != nil {
				t.Fatal(err)
			}
		} else {
			kept++
		}
	}
	if is, err := localseg.IsStore(shard); !is || err != nil || kept == len(entries) {
		t.Fatalf("the store without segments: is=%v %v (kept %d of %d: %v)", is, err, kept, len(entries), entries)
	}
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", dst, "--shard", "0").want(t, 3, "invalid_state")
	r := ok(t, nil, "restore", "--bucket", bucket, "--dir", dst, "--shard", "0", "--if-not-exists")
	if r.obj["skipped"] != true {
		t.Fatalf("restore --if-not-exists over a store that lost its segments:\n%s", r)
	}
}
