package bucketlog

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// dirBytes is every file of dir (not LOCK) with its bytes.
func dirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
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

// A store opened with bucket A refuses bucket B (another bucket, another
// prefix) before changing a byte, naming both URLs; the same bucket spelt
// with its parameters in another order opens.
func TestOpenRefusesAnotherBucket(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	ba, bb, bc := t.TempDir(), t.TempDir(), t.TempDir()
	urlA := "file://" + ba + "?create_dir=true&prefix=logs/&no_tmp_dir=true"
	// Bucket B holds another history of shard 0: a reconcile against it
	// would refuse for another reason, or worse, act.
	x := mustOpen(t, Options{Dir: t.TempDir(), BucketURL: "file://" + bb + "?create_dir=true&prefix=logs/&no_tmp_dir=true", NoBackground: true})
	for i := 1; i <= 5; i++ {
		if _, err := x.Append(ctx, ev("2", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := x.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	x.Close()
	bBefore := dirBytes(t, bb)
	l := mustOpen(t, Options{Dir: dir, BucketURL: urlA, NoBackground: true})
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before := dirBytes(t, dir)
	for _, other := range []string{
		"file://" + bb + "?create_dir=true&prefix=logs/&no_tmp_dir=true", // another bucket, another history
		"file://" + bc + "?create_dir=true&prefix=logs/&no_tmp_dir=true", // another bucket, empty
		"file://" + ba + "?create_dir=true&prefix=log/&no_tmp_dir=true",  // a typo in the prefix
		"file://" + ba + "?create_dir=true&no_tmp_dir=true",              // no prefix
	} {
		_, err := Open(ctx, Options{Dir: dir, BucketURL: other, NoBackground: true})
		if !errors.Is(err, ErrUsage) || Class(err) != ClassUsage {
			t.Fatalf("open with %s: %v", other, err)
		}
		if msg := err.Error(); !strings.Contains(msg, urlA) || !strings.Contains(msg, other) || !strings.Contains(msg, "bucket.json") {
			t.Fatalf("the refusal does not name both URLs and the way out: %v", err)
		}
		if after := dirBytes(t, dir); !maps.Equal(before, after) {
			t.Fatalf("a refused open with %s changed the shard directory", other)
		}
	}
	if got := dirBytes(t, bc); len(got) != 0 {
		t.Fatalf("the other bucket received objects: %v", slicesKeys(got))
	}
	if !maps.Equal(bBefore, dirBytes(t, bb)) {
		t.Fatal("a refused open changed the other bucket")
	}
	// The same bucket, its parameters reordered: opens and keeps its log.
	l = mustOpen(t, Options{Dir: dir, BucketURL: "file://" + ba + "?prefix=logs/&no_tmp_dir=true&create_dir=true", NoBackground: true})
	if n := len(scanAll(t, l)); n != 3 {
		t.Fatalf("reopened with the same bucket: %d events", n)
	}
	l.Close()
	// Re-pointing on purpose: bucket.json removed, the new bucket opens.
	if err := os.Remove(localseg.BucketRecordPath(filepath.Join(dir, "shard-0000"))); err != nil {
		t.Fatal(err)
	}
	urlB := "file://" + bc + "?create_dir=true&prefix=logs/&no_tmp_dir=true"
	l = mustOpen(t, Options{Dir: dir, BucketURL: urlB, NoBackground: true})
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if url, _ := ShipsToBucket(filepath.Join(dir, "shard-0000")); url != urlB {
		t.Fatalf("bucket.json after re-pointing: %q", url)
	}
}

func slicesKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
