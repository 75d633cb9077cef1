package localseg_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// extentFrames decodes the frames of an extent's bytes.
func extentFrames(t *testing.T, s *localseg.Store, ext localseg.Extent) []localseg.Frame {
	t.Helper()
	b, err := s.ReadRange(ext.Segment, ext.Start, ext.End-ext.Start)
	if err != nil {
		t.Fatal(err)
	}
	var out []localseg.Frame
	for f, err := range localseg.Frames(b) {
		if err != nil {
			t.Fatalf("extent %+v: %v", ext, err)
		}
		out = append(out, f)
	}
	return out
}

func eventSeqs(fs []localseg.Frame) []uint64 {
	var out []uint64
	for _, f := range fs {
		if f.Kind == localseg.KindEvent {
			out = append(out, f.Seq)
		}
	}
	return out
}

func TestTailExtent(t *testing.T) {
	dir := t.TempDir()
	o := localseg.Options{SegmentMaxBytes: 4096}
	s := openT(t, dir, o)
	defer closeT(t, s)
	appendMany(t, s, 3, 1)
	if _, err := s.Pull("c", 1); err != nil { // a ConsumerCreate after event 3
		t.Fatal(err)
	}
	appendMany(t, s, 3, 1)
	if _, err := s.Ack("c", 2); err != nil { // an Ack after event 6: waits
		t.Fatal(err)
	}

	ext, ok, err := s.TailExtent(0, 1<<20)
	if err != nil || !ok || ext.Start != 0 || ext.FirstSeq != 1 || ext.LastSeq != 6 || ext.Sealed {
		t.Fatalf("extent after 0: %+v %v %v", ext, ok, err)
	}
	fs := extentFrames(t, s, ext)
	if len(fs) != 7 || fs[3].Kind != localseg.KindConsumerCreate || fs[len(fs)-1].Kind != localseg.KindEvent {
		t.Fatalf("frames %+v: the consumer frame between events rides along, the trailing ack waits", fs)
	}
	// From the middle: starts right after event 3's frame, with the
	// consumer frame.
	ext2, ok, _ := s.TailExtent(3, 1<<20)
	if !ok || ext2.FirstSeq != 4 || ext2.LastSeq != 6 || ext2.End != ext.End {
		t.Fatalf("extent after 3: %+v", ext2)
	}
	if fs := extentFrames(t, s, ext2); fs[0].Kind != localseg.KindConsumerCreate || !slices.Equal(eventSeqs(fs), []uint64{4, 5, 6}) {
		t.Fatalf("frames after 3: %+v", fs)
	}
	// A budget: the last whole event that fits, at least one.
	one, ok, _ := s.TailExtent(0, 1)
	if !ok || one.FirstSeq != 1 || one.LastSeq != 1 {
		t.Fatalf("tiny budget: %+v", one)
	}
	two, _, _ := s.TailExtent(0, one.End*2)
	if two.LastSeq != 2 || two.End > one.End*2 {
		t.Fatalf("budget of two frames: %+v (one ends at %d)", two, one.End)
	}
	twoMinus, _, _ := s.TailExtent(0, two.End-1)
	if twoMinus.LastSeq != 1 {
		t.Fatalf("budget one byte short of two frames: %+v", twoMinus)
	}
	// Nothing after the tip.
	if _, ok, err := s.TailExtent(6, 1<<20); ok || err != nil {
		t.Fatalf("after the tip: %v %v", ok, err)
	}

	// Across a seal: the extent ends in its segment; the next starts at
	// the next segment's beginning.
	if _, err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	appendMany(t, s, 2, 1)
	ext, ok, _ = s.TailExtent(0, 1<<20)
	if !ok || ext.Segment != 1 || !ext.Sealed || ext.LastSeq != 6 {
		t.Fatalf("sealed first segment: %+v", ext)
	}
	ext, ok, _ = s.TailExtent(6, 1<<20)
	if !ok || ext.Segment != 2 || ext.Start != 0 || ext.FirstSeq != 7 || ext.LastSeq != 8 || ext.Sealed {
		t.Fatalf("after a sealed segment: %+v", ext)
	}
	if got := eventSeqs(extentFrames(t, s, ext)); !slices.Equal(got, []uint64{7, 8}) {
		t.Fatalf("events %v", got)
	}
	// Below the base: from the first retained frame.
	appendMany(t, s, 60, 2)
	snap, _ := s.Snapshot()
	if _, err := s.Reclaim(snap.Segments[1].ID); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Snapshot()
	ext, ok, _ = s.TailExtent(2, 1<<20)
	if !ok || ext.FirstSeq != snap.ReclaimedSeq+1 || ext.Start != 0 || ext.Segment != snap.Segments[0].ID {
		t.Fatalf("below the base: %+v (snapshot %+v)", ext, snap.Segments[0])
	}
}

func TestReadRange(t *testing.T) {
	s := openT(t, t.TempDir(), localseg.Options{})
	defer closeT(t, s)
	appendMany(t, s, 3, 1)
	snap, _ := s.Snapshot()
	size := snap.Segments[0].Size
	b, err := s.ReadRange(1, 0, size)
	if err != nil || int64(len(b)) != size {
		t.Fatalf("%d bytes %v", len(b), err)
	}
	if sum, err := localseg.VerifySegment(1, b, 1); err != nil || sum.Events != 3 {
		t.Fatalf("%+v %v", sum, err)
	}
	for _, r := range [][3]int64{{1, 0, size + 1}, {1, -1, 2}, {1, 0, -1}, {9, 0, 1}} {
		if _, err := s.ReadRange(uint64(r[0]), r[1], r[2]); !errors.Is(err, localseg.ErrInvalidInput) {
			t.Errorf("range %v: %v", r, err)
		}
	}
}

func TestAppendRecovered(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, localseg.Options{SegmentMaxBytes: 2048})
	appendMany(t, s, 2, 1)
	frames := []localseg.Frame{
		{Kind: localseg.KindEvent, Seq: 3, ExecutionID: "r", TransactionID: "t3", Payload: "three <&>"},
		{Kind: localseg.KindAck, Consumer: "c", Seq: 2}, // an Ack creates its consumer
		{Kind: localseg.KindConsumerCreate, Consumer: "d"},
		{Kind: localseg.KindEvent, Seq: 4, ExecutionID: "r", TransactionID: "t4", Payload: "four"},
		{Kind: localseg.KindConsumerCreate, Consumer: "x"},
		{Kind: localseg.KindConsumerDelete, Consumer: "x"},
	}
	if err := s.AppendRecovered(frames); err != nil {
		t.Fatal(err)
	}
	bad := [][]localseg.Frame{
		{{Kind: localseg.KindEvent, Seq: 4, ExecutionID: "r", TransactionID: "t", Payload: "dup"}},
		{{Kind: localseg.KindEvent, Seq: 6, ExecutionID: "r", TransactionID: "t", Payload: "gap"}},
		{{Kind: localseg.KindEvent, Seq: 5, ExecutionID: "bad id", TransactionID: "t"}},
		{{Kind: localseg.KindEvent, Seq: 5, ExecutionID: "r", TransactionID: "t"}, {Kind: localseg.KindAck, Consumer: "c", Seq: 0}},
		{{Kind: localseg.KindAck, Consumer: "c", Seq: 99}},
		{{Kind: 42}},
	}
	for i, fs := range bad {
		if err := s.AppendRecovered(fs); !errors.Is(err, localseg.ErrInvalidInput) {
			t.Errorf("bad input %d: %v", i, err)
		}
	}
	if s.Tip() != 4 {
		t.Fatalf("refused frames moved the tip to %d", s.Tip())
	}
	closeT(t, s)
	check := func(s *localseg.Store) {
		t.Helper()
		recs := scanAll(t, s)
		if len(recs) != 4 || recs[2] != (localseg.Record{Seq: 3, ExecutionID: "r", TransactionID: "t3", Payload: "three <&>"}) {
			t.Fatalf("records %+v", recs)
		}
		snap, _ := s.Snapshot()
		if len(snap.Consumers) != 2 || snap.Consumers["c"] != 2 || snap.Consumers["d"] != 0 {
			t.Fatalf("consumers %v", snap.Consumers)
		}
	}
	s = openT(t, dir, localseg.Options{SegmentMaxBytes: 2048})
	check(s)
	if seq := mustAppend(t, s, evt("e", 9)); seq != 5 {
		t.Fatalf("next append %d", seq)
	}
	closeT(t, s)
}
