package localseg_test

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// A rollover's checkpoint is the durable record that the successor exists
// (commitChunk). When its fsync fails the store is poisoned, but the bytes
// stay in the page cache: a restart that keeps the page cache reads a
// checkpoint naming the new segment that a power cut would not keep. An
// open that trusts it without writing it durably again lets appends go to
// a segment no durable record names, and losing that file is then a
// shorter log instead of an error (issue 12 finding 9; simulation seed
// 111187). The open must make the checkpoint durable before it answers.
func TestTrustedCheckpointIsMadeDurableAtOpen(t *testing.T) {
	mem := faultfs.NewMemFS()
	dir := "/d/shard-0000"
	// The second fsync of checkpoint.json: the first is the open's, the
	// second the rollover's.
	fault := faultfs.OnIndex(1, faultfs.Errno(syscall.EIO), faultfs.And(faultfs.Kinds(faultfs.OpSync), faultfs.PathContains("checkpoint.json")))
	o := localseg.Options{SegmentMaxBytes: 4096, FS: faultfs.Wrap(mem, fault)}
	s := openT(t, dir, o)
	for i := range 3 {
		mustAppend(t, s, evt("e", i))
	}
	if _, err := s.Seal(); err == nil {
		t.Fatal("the seal's checkpoint fsync failed, and the seal reported success")
	}
	if _, ok := fault.Fired(); !ok {
		t.Fatal("the fault never fired")
	}
	s.Close()

	// Restart with the page cache kept: the checkpoint names segment 2.
	s = openT(t, dir, localseg.Options{SegmentMaxBytes: 4096, FS: mem})
	for i := 3; i < 6; i++ {
		mustAppend(t, s, evt("e", i))
	}
	// Power cut, then the segment that holds 4..6 is lost.
	crashed := mem.CrashClone(faultfs.CrashOptions{})
	if err := crashed.Remove(filepath.Join(dir, localseg.SegmentFileName(2))); err != nil {
		t.Fatal(err)
	}
	s2, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 4096, FS: crashed})
	if err == nil {
		tip := s2.Tip()
		s2.Close()
		t.Fatalf("the store lost the segment holding acknowledged events 4..6 and opened at tip %d", tip)
	}
	if !errors.Is(err, localseg.ErrLostState) || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("open: %v, want ErrLostState naming the checkpoint", err)
	}
}
