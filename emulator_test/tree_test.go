package emulator_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tree is a shard directory as bytes on disk: every file (below
// subdirectories too) by its slash path relative to the directory, mapped
// to the SHA-256 of its contents; a directory maps to "dir".
type tree map[string]string

// treeOf hashes every file under dir, checkpoint.json, index files and
// manifests included: a refused Open must leave each of them as it found
// it. An empty LOCK is left out: it is the lock file every writable open
// creates (and never removes) and it carries no state; a LOCK with bytes in
// it is hashed like any file.
func treeOf(t *testing.T, dir string) tree {
	t.Helper()
	out := tree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "LOCK" && len(data) == 0 {
			return nil
		}
		sum := sha256.Sum256(data)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatalf("hash %s: %v", dir, err)
	}
	return out
}

// diff lists what differs between two trees (empty: byte-identical).
func (a tree) diff(b tree) []string {
	var out []string
	for k, v := range a {
		switch w, ok := b[k]; {
		case !ok:
			out = append(out, "removed "+k)
		case v != w:
			out = append(out, "changed "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "added "+k)
		}
	}
	slices.Sort(out)
	return out
}

// sameTree fails unless dir still holds exactly the files of before, byte
// for byte.
func sameTree(t *testing.T, what string, before tree, dir string) {
	t.Helper()
	if d := before.diff(treeOf(t, dir)); len(d) > 0 {
		t.Fatalf("%s changed the shard directory %s: %s", what, dir, strings.Join(d, ", "))
	}
}
