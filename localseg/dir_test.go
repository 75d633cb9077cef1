package localseg_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestDirAPI: what other packages learn about a store directory through
// localseg's exported functions, without naming its files.
func TestDirAPI(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "s")
	if is, err := localseg.IsStore(dir); is || err != nil {
		t.Fatalf("a missing directory: IsStore = %v, %v", is, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := localseg.ReadCheckpointFile(dir); b != nil || err != nil {
		t.Fatalf("no checkpoint: %q %v", b, err)
	}
	if _, ok, err := localseg.ReadBucketRecord(dir); ok || err != nil {
		t.Fatalf("no bucket record: ok=%v %v", ok, err)
	}
	s := openT(t, dir, localseg.Options{})
	if _, err := s.Append(localseg.Event{ExecutionID: "e", TransactionID: "t", Payload: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if is, err := localseg.IsStore(dir); !is || err != nil {
		t.Fatalf("a store: IsStore = %v, %v", is, err)
	}
	if b, err := localseg.ReadCheckpointFile(dir); len(b) == 0 || err != nil {
		t.Fatalf("a closed store's checkpoint: %q %v", b, err)
	}
	if err := localseg.RemoveCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := localseg.ReadCheckpointFile(dir); b != nil || localseg.RemoveCheckpoint(dir) != nil {
		t.Fatalf("the checkpoint is still there, or removing none fails: %q", b)
	}
	if err := localseg.WriteBucketRecord(localseg.OSFS{}, dir, "s3://b/p"); err != nil {
		t.Fatal(err)
	}
	if url, ok, err := localseg.ReadBucketRecord(dir); url != "s3://b/p" || !ok || err != nil {
		t.Fatalf("bucket record = %q %v %v", url, ok, err)
	}
	if err := os.WriteFile(localseg.BucketRecordPath(dir), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if url, ok, err := localseg.ReadBucketRecord(dir); !ok || err != nil || url == "" {
		t.Fatalf("a damaged record must still say the store ships: %q %v %v", url, ok, err)
	}
	if !localseg.IsSegmentFile(localseg.SegmentFileName(7)) || localseg.IsSegmentFile(localseg.SegmentFileName(7)+".tmp") {
		t.Fatal("IsSegmentFile")
	}
	if !localseg.IsLockFile(filepath.Base(localseg.LockPath(dir))) {
		t.Fatal("IsLockFile(LockPath)")
	}
}

// TestImportSegments: segments move only as a consecutive run from first,
// with their index files; a gap or an empty source is refused.
func TestImportSegments(t *testing.T) {
	fsys := localseg.OSFS{}
	synced := func(string) bool { return false }
	from, to := t.TempDir(), t.TempDir()
	if err := localseg.ImportSegments(fsys, synced, from, to, 3); err == nil {
		t.Fatal("an empty source was imported")
	}
	for _, id := range []uint64{3, 4} {
		if err := localseg.WriteSegmentFile(fsys, from, id, []byte{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := localseg.ImportSegments(fsys, synced, from, to, 2); err == nil {
		t.Fatal("segments 3 and 4 were imported as a run from 2")
	}
	if err := localseg.ImportSegments(fsys, synced, from, to, 3); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{3, 4} {
		if _, err := os.Stat(filepath.Join(to, localseg.SegmentFileName(id))); err != nil {
			t.Fatalf("segment %d did not move: %v", id, err)
		}
	}
	if is, _ := localseg.IsStore(from); is {
		t.Fatal("the source still holds segments")
	}
}
