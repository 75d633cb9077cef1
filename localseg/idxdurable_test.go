package localseg_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// The index file written at a seal is durable once the seal returns: a
// power cut right after it leaves the record a heal checks a copy against
// (docs/FORMAT.md §3.6). RED control: the index file written without an
// fsync, or after the directory fsync that makes its entry durable, is
// lost in the crash.
func TestSealIndexFileSurvivesACrash(t *testing.T) {
	mem := faultfs.NewMemFS()
	dir := "/store"
	s := openT(t, dir, localseg.Options{SegmentMaxBytes: 4096, FS: mem})
	for i := range 5 {
		mustAppend(t, s, evt("e", i))
	}
	if sealed, err := s.Seal(); !sealed || err != nil {
		t.Fatalf("seal: %v, %v", sealed, err)
	}
	for _, torn := range []bool{false, true} {
		crashed := mem.CrashClone(faultfs.CrashOptions{Torn: torn, Seed: 7})
		seg, err := crashed.ReadFile(filepath.Join(dir, localseg.SegmentFileName(1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, first, ok := localseg.SegmentRecord(crashed, dir, 1, int64(len(seg))); !ok || first != 1 {
			t.Fatalf("torn=%v: after a crash right after the seal the index file of segment 1 is %s", torn, fmt.Sprint(map[bool]string{true: "wrong", false: "lost"}[ok]))
		}
	}
	closeT(t, s)
}
