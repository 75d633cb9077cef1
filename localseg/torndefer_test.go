package localseg_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// With DeferCleanup a writable open leaves a torn tail as it found it
// until RemoveLeftovers (a refused open changes no byte), and a write
// before that call repairs first: the new frame never lands in front of
// the torn bytes, and RemoveLeftovers then cuts nothing it wrote.
func TestDeferredRepairOfATornTail(t *testing.T) {
	mem := faultfs.NewMemFS()
	dir := "/d/shard-0000"
	s := openT(t, dir, localseg.Options{FS: mem})
	for i := range 3 {
		mustAppend(t, s, evt("e", i))
	}
	closeT(t, s)
	seg := filepath.Join(dir, localseg.SegmentFileName(1))
	data, err := mem.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := len(bytes.TrimRight(data, "\x00"))
	f, err := mem.OpenFile(seg, 2, 0) // O_RDWR
	if err != nil {
		t.Fatal(err)
	}
	torn := []byte{0x01, 0x00, 0xdb, 0xe5, 0x66, 0x00, 0x00, 0x00, 'x', 'y'}
	if _, err := f.WriteAt(torn, int64(end)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := mem.ReadFile(seg)

	s = openT(t, dir, localseg.Options{FS: mem, DeferCleanup: true})
	if got, _ := mem.ReadFile(seg); !bytes.Equal(got, before) {
		t.Fatal("the open with DeferCleanup repaired the torn tail before RemoveLeftovers")
	}
	if s.OpenReport().TornTailBytes == 0 {
		t.Fatal("the torn tail was not found")
	}
	mustAppend(t, s, evt("e", 3)) // before RemoveLeftovers: repairs first
	if err := s.RemoveLeftovers(); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)

	s = openT(t, dir, localseg.Options{FS: mem.CrashClone(faultfs.CrashOptions{})})
	defer s.Close()
	p, err := s.Scan(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 4 || p.Records[3].TransactionID != evt("e", 3).TransactionID {
		t.Fatalf("after the repair: %d records, want the 3 and the one appended before RemoveLeftovers", len(p.Records))
	}
}
