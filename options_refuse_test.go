package bucketlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenRefusesContradictoryOptions: options that contradict each other
// (synchronous mode with tail replication off, or with no bucket) are
// refused by Open as usage (exit 2) before anything is written; before
// issue 12 (finding 3) every append was written and then refused.
func TestOpenRefusesContradictoryOptions(t *testing.T) {
	cases := []struct {
		name string
		opts func(dir string) Options
	}{
		{"sync without tail replication", func(dir string) Options {
			return Options{Dir: dir, Bucket: memBucket(t), SyncToBucket: true, DisableTailReplication: true}
		}},
		{"sync without a bucket", func(dir string) Options {
			return Options{Dir: dir, SyncToBucket: true}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root")
			l, err := Open(ctxT(t), tc.opts(dir))
			if err == nil {
				l.Close()
				t.Fatal("Open accepted contradictory options")
			}
			if !errors.Is(err, ErrUsage) || Class(err) != ClassUsage {
				t.Fatalf("Open: %v (class %s), want usage, exit 2", err, Class(err))
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused Open created %s (%v)", dir, err)
			}
		})
	}
	// An existing store is left byte-identical.
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir})
	if _, err := l.Append(ctxT(t), ev("1", 1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	before := snapshotTree(t, dir)
	if l, err := Open(ctxT(t), Options{Dir: dir, Bucket: memBucket(t), SyncToBucket: true, DisableTailReplication: true}); err == nil || !errors.Is(err, ErrUsage) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("Open: %v, want usage", err)
	}
	if after := snapshotTree(t, dir); !mapsEqual(before, after) {
		t.Fatal("the refused Open changed the store")
	}
}

// snapshotTree maps every file under dir to its content.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
