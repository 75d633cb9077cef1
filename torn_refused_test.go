package bucketlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// A refused Open changes no byte of the shard directory (issue 12 finding
// 1), also where the writable open would repair a torn tail: the repair
// (truncating the torn bytes, re-writing and fsyncing what is kept,
// preallocating) waits for the bucket's verdict. Here a stale copy of the
// disk with a torn last write is refused as stale.
func TestRefusedOpenKeepsATornTail(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	stale := t.TempDir()
	shard := filepath.Join(stale, "shard-0000")
	copyDir(t, filepath.Join(dir, "shard-0000"), shard)
	l = mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	for i := 4; i <= 6; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	l.Close()

	// The stale copy's last write was torn: the head of a frame after the
	// last whole one, never acknowledged.
	entries, err := os.ReadDir(shard)
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	for _, e := range entries {
		if localseg.IsSegmentFile(e.Name()) {
			seg = filepath.Join(shard, e.Name()) // the highest: names sort by id
		}
	}
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := len(bytes.TrimRight(data, "\x00"))
	if end == 0 {
		t.Fatalf("%s holds no frame", seg)
	}
	torn := append(data[:end:end], 0x01, 0x00, 0xdb, 0xe5, 0x66, 0x00, 0x00, 0x00, 'x', 'y')
	if err := os.WriteFile(seg, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	before := segmentBytes(t, shard)

	_, err = Open(ctx, Options{Dir: stale, Bucket: b, NoBackground: true})
	if !errors.Is(err, ErrStaleDisk) {
		t.Fatalf("open of the stale copy: %v, want ErrStaleDisk", err)
	}
	after := segmentBytes(t, shard)
	for name, was := range before {
		if !bytes.Equal(after[name], was) {
			t.Errorf("the refused Open changed %s (%d bytes, then %d)", name, len(was), len(after[name]))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("the refused Open created %s", name)
		}
	}
}

// segmentBytes reads every segment file of a shard directory.
func segmentBytes(t *testing.T, shard string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(shard)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if localseg.IsSegmentFile(e.Name()) {
			data, err := os.ReadFile(filepath.Join(shard, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = data
		}
	}
	return out
}
