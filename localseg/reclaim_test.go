package localseg_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// reclaimFixture: 60 events over many 1 KiB segments, consumer "a" acked to
// 40, consumer "never" created without acking, consumer "gone" deleted.
func reclaimFixture(t *testing.T, o localseg.Options) (string, *localseg.Store, []localseg.Event) {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, dir, o)
	evs := appendMany(t, s, 5, 3)
	// The consumers' frames land in the first segment, which the reclaim
	// removes: only the write-forward carries them over.
	for _, c := range []string{"a", "b", "never", "gone"} {
		if _, err := s.Pull(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Ack("b", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack("a", 3); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 60; i++ {
		ev := evt(fmt.Sprintf("e%d", i%3), i)
		mustAppend(t, s, ev)
		evs = append(evs, ev)
	}
	if _, err := s.Ack("a", 40); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumer("gone"); err != nil {
		t.Fatal(err)
	}
	return dir, s, evs
}

// reclaimTarget is the highest sealed segment whose events are all at or
// below seq, keeping two segments after it.
func reclaimTarget(t *testing.T, s *localseg.Store, seq uint64) localseg.SegmentInfo {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var through localseg.SegmentInfo
	for i, seg := range snap.Segments {
		if i+2 < len(snap.Segments) && seg.Sealed && seg.LastSeq <= seq {
			through = seg
		}
	}
	if through.ID < 2 {
		t.Fatalf("no reclaimable prefix in %+v", snap.Segments)
	}
	return through
}

// TestReclaim: the crash-safe order of docs/FORMAT.md §8.2, the base offset, consumers
// surviving the removal of the segments that created them, reopen on both
// the checkpoint and the replay path (CHECKLIST §5.5, §1.24).
func TestReclaim(t *testing.T) {
	h := newHookFS()
	o := localseg.Options{FS: h, SegmentMaxBytes: 1024}
	dir, s, evs := reclaimFixture(t, o)
	through := reclaimTarget(t, s, 40)
	h.takeLog()
	res, err := s.Reclaim(through.ID)
	if err != nil {
		t.Fatal(err)
	}
	var wantRemoved []uint64
	for id := uint64(1); id <= through.ID; id++ {
		wantRemoved = append(wantRemoved, id)
	}
	if res.ThroughSeq != through.LastSeq || res.ThroughSegment != through.ID || !slices.Equal(res.Removed, wantRemoved) || res.Bytes == 0 {
		t.Fatalf("result %+v, want through %d/%d", res, through.LastSeq, through.ID)
	}
	// The order: write-forward and its fsync, the manifest (temporary
	// file, fsync, rename, directory fsync), then the unlinks.
	log := h.takeLog()
	idx := func(pred func(string) bool) int { return slices.IndexFunc(log, pred) }
	lastIdx := func(pred func(string) bool) int {
		for i := len(log) - 1; i >= 0; i-- {
			if pred(log[i]) {
				return i
			}
		}
		return -1
	}
	is := func(op, name string) func(string) bool {
		return func(l string) bool { return strings.HasPrefix(l, op+" ") && strings.Contains(l, name) }
	}
	wf := idx(is("write", "seg-"))
	wfSync := idx(is("datasync", "seg-"))
	mCreate := idx(is("create", "reclaim.json.tmp"))
	mSync := idx(is("sync", "reclaim.json.tmp"))
	mRename := idx(is("rename", "reclaim.json"))
	mDir := -1
	if mRename >= 0 {
		if i := slices.IndexFunc(log[mRename:], func(l string) bool { return strings.HasPrefix(l, "syncdir") }); i >= 0 {
			mDir = mRename + i
		}
	}
	firstRm := idx(is("remove", "seg-"))
	lastRm := lastIdx(is("remove", "seg-"))
	order := []int{wf, wfSync, mCreate, mSync, mRename, mDir, firstRm, lastRm}
	if slices.Contains(order, -1) || !slices.IsSorted(order) {
		t.Fatalf("operations out of the crash-safe order %v:\n%s", order, strings.Join(log, "\n"))
	}
	check := func(s *localseg.Store) {
		t.Helper()
		p, err := s.Scan(0, 1000)
		if err != nil || !p.Clamped || p.Base != res.ThroughSeq+1 || p.RecordCount != uint64(60-res.ThroughSeq) {
			t.Fatalf("scan from 0: base %d clamped %v count %d %v", p.Base, p.Clamped, p.RecordCount, err)
		}
		wantRecords(t, p.Records, evs[res.ThroughSeq:], res.ThroughSeq+1)
		if p, _ := s.Scan(res.ThroughSeq, 1); p.Clamped {
			t.Fatal("a scan from the base itself is not clamped")
		}
		if _, err := s.Get(res.ThroughSeq); !errors.Is(err, localseg.ErrReclaimed) || errors.Is(err, localseg.ErrCorrupt) {
			t.Fatalf("get of a reclaimed event: %v", err)
		}
		if r, err := s.Get(res.ThroughSeq + 1); err != nil || r.Seq != res.ThroughSeq+1 {
			t.Fatalf("get of the base: %+v %v", r, err)
		}
		e0 := 0
		for _, ev := range evs[res.ThroughSeq:] {
			if ev.ExecutionID == "e0" {
				e0++
			}
		}
		if p, err := s.ReadExecution("e0", 0, 1000); err != nil || len(p.Records) != e0 || !p.Clamped || p.Records[0].Seq <= res.ThroughSeq {
			t.Fatalf("read execution after reclaim: %d records %v", len(p.Records), err)
		}
		snap, _ := s.Snapshot()
		if snap.ReclaimedSeq != res.ThroughSeq || snap.ReclaimedSeg != through.ID || snap.Segments[0].ID != through.ID+1 || snap.Segments[0].FirstSeq != res.ThroughSeq+1 {
			t.Fatalf("snapshot %+v", snap)
		}
		if len(snap.Consumers) != 3 || snap.Consumers["a"] != 40 || snap.Consumers["b"] != 4 || snap.Consumers["never"] != 0 {
			t.Fatalf("consumers %v", snap.Consumers)
		}
		for id := uint64(1); id <= through.ID; id++ {
			if _, err := os.Stat(filepath.Join(dir, localseg.SegmentFileName(id))); !os.IsNotExist(err) {
				t.Fatalf("segment %d still on disk", id)
			}
		}
	}
	check(s)
	closeT(t, s)
	for _, mode := range []string{"checkpoint", "replay"} {
		if mode == "replay" {
			os.Remove(filepath.Join(dir, "checkpoint.json"))
		}
		s = openT(t, dir, localseg.Options{SegmentMaxBytes: 1024})
		check(s)
		closeT(t, s)
	}
	s = openT(t, dir, localseg.Options{SegmentMaxBytes: 1024})
	defer closeT(t, s)
	if seq := mustAppend(t, s, evt("post", 0)); seq != 61 {
		t.Fatalf("append after reclaim: %d", seq)
	}
}

func TestReclaimRefusals(t *testing.T) {
	_, s, _ := reclaimFixture(t, localseg.Options{SegmentMaxBytes: 1024})
	defer closeT(t, s)
	snap, _ := s.Snapshot()
	active := snap.Segments[len(snap.Segments)-1].ID
	if _, err := s.Reclaim(active); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("reclaim of the active segment: %v", err)
	}
	if _, err := s.Reclaim(active + 5); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("reclaim beyond the active segment: %v", err)
	}
	if _, err := s.Reclaim(3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reclaim(2); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("backward reclaim: %v", err)
	}
	if r, err := s.Reclaim(3); err != nil || len(r.Removed) != 0 || r.ThroughSegment != 3 {
		t.Fatalf("repeated reclaim: %+v %v", r, err)
	}
}

// TestReclaimLeftovers: a crash between the manifest and the unlinks leaves
// segments at or below it; the next open deletes them without reading them
// (a garbage leftover is harmless), on the checkpoint and the replay path,
// and a read-only open skips them without deleting (CHECKLIST §5.6).
func TestReclaimLeftovers(t *testing.T) {
	for _, mode := range []string{"checkpoint", "replay"} {
		t.Run(mode, func(t *testing.T) {
			o := localseg.Options{SegmentMaxBytes: 1024}
			dir, s, evs := reclaimFixture(t, o)
			through := reclaimTarget(t, s, 40)
			closeT(t, s)
			// A real reclaim, then the reclaimed files put back (one
			// empty, the others garbage): the state a crash between the
			// manifest commit and the unlinks leaves.
			s = openT(t, dir, o)
			if _, err := s.Reclaim(through.ID); err != nil {
				t.Fatal(err)
			}
			closeT(t, s)
			for id := uint64(1); id <= through.ID; id++ {
				junk := []byte("garbage that is not a frame at all")
				if id == 1 {
					junk = nil
				}
				os.WriteFile(filepath.Join(dir, localseg.SegmentFileName(id)), junk, 0o644)
			}
			if mode == "replay" {
				os.Remove(filepath.Join(dir, "checkpoint.json"))
			}
			ro := openT(t, dir, localseg.Options{ReadOnly: true})
			if got := scanAll(t, ro); len(got) != 60-int(through.LastSeq) {
				t.Fatalf("read-only: %d records", len(got))
			}
			closeT(t, ro)
			if _, err := os.Stat(filepath.Join(dir, localseg.SegmentFileName(1))); err != nil {
				t.Fatal("the read-only open deleted a leftover")
			}
			s = openT(t, dir, o)
			defer closeT(t, s)
			rep := s.OpenReport()
			if len(rep.LeftoversRemoved) != int(through.ID) || rep.Replayed != (mode == "replay") {
				t.Fatalf("report %+v", rep)
			}
			for id := uint64(1); id <= through.ID; id++ {
				if _, err := os.Stat(filepath.Join(dir, localseg.SegmentFileName(id))); !os.IsNotExist(err) {
					t.Fatalf("leftover %d not deleted", id)
				}
			}
			wantRecords(t, scanAll(t, s), evs[through.LastSeq:], through.LastSeq+1)
		})
	}
}

// A manifest committed before the reclaim's write-forward is impossible by
// construction; the RED control shows why the write-forward exists: delete
// the segments below a manifest written by hand (no write-forward), and a
// replay loses the consumer whose only frames were in them.
func TestReclaimWriteForwardRedControl(t *testing.T) {
	o := localseg.Options{SegmentMaxBytes: 1024}
	dir := t.TempDir()
	s := openT(t, dir, o)
	appendMany(t, s, 5, 1)
	if _, err := s.Pull("early", 1); err != nil { // created in segment 1
		t.Fatal(err)
	}
	if _, err := s.Ack("early", 5); err != nil {
		t.Fatal(err)
	}
	appendMany(t, s, 40, 2)
	through := reclaimTarget(t, s, 14)
	closeT(t, s)

	for _, writeForward := range []bool{true, false} {
		work := t.TempDir()
		copyDir(t, dir, work)
		if writeForward {
			s := openT(t, work, o)
			if _, err := s.Reclaim(through.ID); err != nil {
				t.Fatal(err)
			}
			closeT(t, s)
		} else {
			if err := localseg.WriteReclaimManifest(localseg.OSFS{}, work, localseg.ReclaimManifest{ReclaimedThroughSeq: through.LastSeq, ReclaimedThroughSegment: through.ID}); err != nil {
				t.Fatal(err)
			}
		}
		os.Remove(filepath.Join(work, "checkpoint.json"))
		s := openT(t, work, o)
		snap, _ := s.Snapshot()
		closeT(t, s)
		cur, ok := snap.Consumers["early"]
		if writeForward != ok || writeForward && cur != 5 {
			t.Fatalf("write-forward=%v: consumer present %v at %d", writeForward, ok, cur)
		}
		if !writeForward {
			t.Logf("RED as expected: without the write-forward the consumer is lost: %v", snap.Consumers)
		}
	}
}

func TestReclaimManifestCodec(t *testing.T) {
	dir := t.TempDir()
	if m, err := localseg.ReadReclaimManifest(localseg.OSFS{}, dir); err != nil || m != (localseg.ReclaimManifest{}) {
		t.Fatalf("absent manifest: %+v %v", m, err)
	}
	want := localseg.ReclaimManifest{ReclaimedThroughSeq: 1234, ReclaimedThroughSegment: 7}
	if err := localseg.WriteReclaimManifest(localseg.OSFS{}, dir, want); err != nil {
		t.Fatal(err)
	}
	if m, err := localseg.ReadReclaimManifest(localseg.OSFS{}, dir); err != nil || m != want {
		t.Fatalf("round trip: %+v %v", m, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "reclaim.json"))
	if string(b) != "{\"reclaimed_through_seq\":1234,\"reclaimed_through_segment\":7}\n" {
		t.Fatalf("encoding %q", b)
	}
	for _, bad := range []string{"", "{", `{"reclaimed_through_seq":1}`, `{"reclaimed_through_seq":-1,"reclaimed_through_segment":1}`, `[]`} {
		os.WriteFile(filepath.Join(dir, "reclaim.json"), []byte(bad), 0o644)
		if _, err := localseg.ReadReclaimManifest(localseg.OSFS{}, dir); !errors.Is(err, localseg.ErrCorrupt) {
			t.Errorf("%q: %v", bad, err)
		}
		if _, err := localseg.Open(dir, localseg.Options{}); !errors.Is(err, localseg.ErrCorrupt) {
			t.Errorf("open over %q: %v", bad, err)
		}
	}
}

// A cold load writes the manifest first: the store's base and next segment
// id start above it.
func TestOpenOverManifestOnly(t *testing.T) {
	dir := t.TempDir()
	if err := localseg.WriteReclaimManifest(localseg.OSFS{}, dir, localseg.ReclaimManifest{ReclaimedThroughSeq: 100, ReclaimedThroughSegment: 9}); err != nil {
		t.Fatal(err)
	}
	s := openT(t, dir, localseg.Options{})
	defer closeT(t, s)
	if s.Tip() != 100 {
		t.Fatalf("tip %d", s.Tip())
	}
	if seq := mustAppend(t, s, evt("e", 0)); seq != 101 {
		t.Fatalf("first append %d", seq)
	}
	snap, _ := s.Snapshot()
	if snap.Segments[0].ID != 10 || snap.Segments[0].FirstSeq != 101 {
		t.Fatalf("segments %+v", snap.Segments)
	}
	p, _ := s.Scan(0, 10)
	if !p.Clamped || p.Base != 101 || len(p.Records) != 1 {
		t.Fatalf("scan %+v", p)
	}
	if _, err := s.Get(50); !errors.Is(err, localseg.ErrReclaimed) {
		t.Fatalf("get 50: %v", err)
	}
}
