package localseg_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// Self-healing from the bucket (heal.go).

// sealedIDs returns the sealed segments of s.
func sealedIDs(t *testing.T, s *localseg.Store) []uint64 {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, seg := range snap.Segments {
		if seg.Sealed {
			ids = append(ids, seg.ID)
		}
	}
	if len(ids) < 4 {
		t.Fatalf("only %d sealed segments", len(ids))
	}
	return ids
}

// flipSegment flips one byte in the middle of segment id's file and
// returns the file's bytes after the flip.
func flipSegment(t *testing.T, fsys localseg.FS, dir string, id uint64) []byte {
	t.Helper()
	f, err := fsys.OpenFile(filepath.Join(dir, localseg.SegmentFileName(id)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x20
	if _, err := f.WriteAt(b[len(b)/2:len(b)/2+1], int64(len(b)/2)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHealReplacesACorruptSealedSegment: a flipped byte in a sealed
// segment, found by a page read (the index built) or by the index build
// itself (after a restart, even for a read far past the segment), is
// replaced by the bucket's copy: every event reads back byte for byte,
// the segment is evicted (its file gone, its reads from the bucket), the
// heal is counted, and a restart keeps it.
func TestHealReplacesACorruptSealedSegment(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote(), cache: 64 << 10}
	s := f.open(t)
	f.append(t, s, 600)
	f.remote.ship(t, s)
	s.SetHealCheck(f.remote.has)
	ids := sealedIDs(t, s)
	if _, err := s.Scan(0, 1); err != nil { // the index is built
		t.Fatal(err)
	}
	flipSegment(t, f.fs, f.dir, ids[1])
	f.check(t, s, 0)
	if !s.IsEvicted(ids[1]) || s.Unhealed() != nil {
		t.Fatalf("segment %d: evicted %v, unhealed %v", ids[1], s.IsEvicted(ids[1]), s.Unhealed())
	}
	if _, err := os.Stat(filepath.Join(f.dir, localseg.SegmentFileName(ids[1]))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the corrupt file is still there: %v", err)
	}
	if st := s.RemoteStats(); st.Healed != 1 || st.Corrupt != 0 {
		t.Fatalf("stats after a page heal: %+v", st)
	}
	s.Close()

	// The index build finds the next one: the first read, far past it.
	// The open's transaction window stopped at it, and the heal rebuilds
	// the window: a retry of one of its events is a duplicate.
	flipSegment(t, f.fs, f.dir, ids[2])
	s = f.open(t)
	s.SetHealCheck(f.remote.has)
	inTwo := segmentFirst(t, s, ids[2])
	p, err := s.Scan(uint64(len(f.want)-3), 10)
	if err != nil || len(p.Records) != 3 {
		t.Fatalf("a scan past the corrupt segment: %d records, %v", len(p.Records), err)
	}
	f.check(t, s, 0)
	if st := s.RemoteStats(); st.Healed != 1 || !s.IsEvicted(ids[2]) {
		t.Fatalf("stats after an index heal: %+v", st)
	}
	if res, err := s.Append(f.want[inTwo-1]); err != nil || !res.Duplicate || res.Seq != inTwo {
		t.Fatalf("a retry of event %d of the healed segment: %+v, %v", inTwo, res, err)
	}
	// Without its index file (a power cut took it: it is never fsynced)
	// the shipper's durable record and the frames stand for the digest.
	if err := os.Remove(filepath.Join(f.dir, localseg.SegmentIndexFileName(ids[3]))); err != nil {
		t.Fatal(err)
	}
	flipSegment(t, f.fs, f.dir, ids[3])
	f.check(t, s, 0)
	if st := s.RemoteStats(); st.Healed != 2 || !s.IsEvicted(ids[3]) {
		t.Fatalf("stats after a heal without an index file: %+v", st)
	}
	f.append(t, s, 20)
	s.Close()
	s = f.open(t) // no heal check: both read from the bucket as evicted segments
	defer s.Close()
	f.check(t, s, 0)
}

// TestHealRefusesWithoutAVerifiedCopy: without a copy that is the sealed
// segment the read answers the corruption, the segment is reported
// (Unhealed, RemoteStats.Corrupt) and nothing on the disk changes; a
// bucket that fails the fetch is a storage error. Once a good copy is
// there, the next read heals.
func TestHealRefusesWithoutAVerifiedCopy(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(t *testing.T, f *evictFixture, s *localseg.Store, id uint64)
		remote bool // a storage error, not a verdict
	}{
		{"no heal check", func(t *testing.T, f *evictFixture, s *localseg.Store, id uint64) { s.SetHealCheck(nil) }, false},
		{"not durable", func(t *testing.T, f *evictFixture, s *localseg.Store, id uint64) {
			s.SetHealCheck(func(uint64) bool { return false })
		}, false},
		{"copy shorter", func(t *testing.T, f *evictFixture, s *localseg.Store, id uint64) {
			f.remote.objs[id] = f.remote.objs[id][:len(f.remote.objs[id])-1]
		}, false},
		{"copy of other events", func(t *testing.T, f *evictFixture, s *localseg.Store, id uint64) {
			// A segment of valid frames, as long, from the same first
			// event: one payload differs in one character.
			g := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
			gs := g.open(t)
			defer gs.Close()
			for i, ev := range f.want {
				if i == 200 {
					ev.Payload = strings.Repeat("x", len(ev.Payload))
				}
				if _, err := gs.Append(ev); err != nil {
					t.Fatal(err)
				}
			}
			b, err := gs.ReadSegment(id)
			if err != nil || len(b) != len(f.remote.objs[id]) || bytes.Equal(b, f.remote.objs[id]) {
				t.Fatalf("the other segment %d: %d bytes against %d, %v", id, len(b), len(f.remote.objs[id]), err)
			}
			f.remote.objs[id] = b
		}, false},
		{"copy damaged, no index file", func(t *testing.T, f *evictFixture, s *localseg.Store, id uint64) {
			// Nothing recorded locally; the copy's own digest names its
			// damaged bytes: only its frames tell.
			if err := os.Remove(filepath.Join(f.dir, localseg.SegmentIndexFileName(id))); err != nil {
				t.Fatal(err)
			}
			b := bytes.Clone(f.remote.objs[id])
			b[len(b)/3] ^= 0x01
			f.remote.objs[id] = b
		}, false},
		{"bucket failing", func(t *testing.T, f *evictFixture, s *localseg.Store, id uint64) {
			f.remote.fail = errors.New("injected: the bucket is down")
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote(), cache: 64 << 10}
			s := f.open(t)
			defer s.Close()
			f.append(t, s, 600)
			f.remote.ship(t, s)
			s.SetHealCheck(f.remote.has)
			id := segmentHolding(t, s, 201)
			good := f.remote.objs[id]
			flipped := flipSegment(t, f.fs, f.dir, id)
			c.setup(t, f, s, id)
			_, err := s.Scan(0, len(f.want))
			switch {
			case c.remote && (!errors.Is(err, localseg.ErrRemoteRead) || errors.Is(err, localseg.ErrCorrupt)):
				t.Fatalf("scan with the bucket failing: %v, want a storage error", err)
			case !c.remote && !errors.Is(err, localseg.ErrCorrupt):
				t.Fatalf("scan: %v, want the corruption", err)
			}
			if unhealed := s.Unhealed(); c.remote != (unhealed == nil) || !c.remote && !strings.Contains(unhealed.Error(), fmt.Sprint("segment ", id)) {
				t.Fatalf("unhealed: %v", unhealed)
			}
			if st := s.RemoteStats(); st.Healed != 0 || st.Corrupt != map[bool]int{false: 1, true: 0}[c.remote] || s.IsEvicted(id) {
				t.Fatalf("stats: %+v, evicted %v", st, s.IsEvicted(id))
			}
			if now, err := os.ReadFile(filepath.Join(f.dir, localseg.SegmentFileName(id))); err != nil || !bytes.Equal(now, flipped) {
				t.Fatalf("the refused heal changed the segment file: %v", err)
			}
			if _, err := os.Stat(filepath.Join(f.dir, "evicted.json")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused heal wrote an eviction record: %v", err)
			}
			// A good copy and a durable object: the next read heals.
			f.remote.fail, f.remote.objs[id] = nil, good
			s.SetHealCheck(f.remote.has)
			f.check(t, s, 0)
			if st := s.RemoteStats(); st.Healed != 1 || st.Corrupt != 0 || s.Unhealed() != nil {
				t.Fatalf("stats after the heal: %+v", st)
			}
		})
	}
}

// segmentHolding is the segment of s that holds sequence seq.
func segmentHolding(t *testing.T, s *localseg.Store, seq uint64) uint64 {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range snap.Segments {
		if seg.Sealed && seg.FirstSeq <= seq && seq <= seg.LastSeq {
			return seg.ID
		}
	}
	t.Fatalf("no sealed segment holds %d", seq)
	return 0
}

// TestHealCrashSweep crashes at every write-class operation of a heal
// (and then tears what was not synced): every clone opens, and either
// still has the corrupt file (a read heals it then) or has evicted it;
// every event reads back.
func TestHealCrashSweep(t *testing.T) {
	points := 0
	for k := int64(0); ; k++ {
		mem := faultfs.NewMemFS()
		crash := faultfs.CrashAt(k)
		tog := faultfs.NewToggle(crash, false)
		f := &evictFixture{dir: "/shard", fs: faultfs.Wrap(mem, tog), remote: newFakeRemote(), cache: 64 << 10}
		s := f.open(t)
		f.append(t, s, 300)
		f.remote.ship(t, s)
		s.SetHealCheck(f.remote.has)
		id := sealedIDs(t, s)[1]
		if _, err := s.Scan(0, 1); err != nil {
			t.Fatal(err)
		}
		flipSegment(t, f.fs, f.dir, id)
		tog.On()
		_, err := s.Scan(0, len(f.want))
		s.Close()
		if _, crashed := crash.Crashed(); !crashed {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		points++
		for seed := uint64(0); seed < 3; seed++ {
			f.fs = mem.CrashClone(faultfs.CrashOptions{Torn: seed > 0, Seed: uint64(k)<<8 | seed})
			s, err := localseg.Open(f.dir, f.options())
			if err != nil {
				t.Fatalf("crash point %d seed %d: reopen: %v", k, seed, err)
			}
			s.SetHealCheck(f.remote.has)
			f.check(t, s, 0)
			if !s.IsEvicted(id) {
				t.Fatalf("crash point %d seed %d: segment %d neither healed nor evicted", k, seed, id)
			}
			s.Close()
		}
	}
	if points < 2 {
		t.Fatalf("only %d crash points inside a heal", points)
	}
	t.Logf("crash points inside a heal: %d", points)
}

// segmentFirst is the first event of segment id of s.
func segmentFirst(t *testing.T, s *localseg.Store, id uint64) uint64 {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range snap.Segments {
		if seg.ID == id && seg.Events > 0 {
			return seg.FirstSeq
		}
	}
	t.Fatalf("segment %d holds no event", id)
	return 0
}

// TestTxWindowReadsADamagedSegmentsCopy: the open's transaction window
// reads a damaged sealed segment's ids from its verified bucket copy, so a
// retry of one of them is a duplicate before anything heals the file, and
// the read index is built from it too (a read past the segment works, one
// of it finds the damage); with the bucket failing the open refuses writes
// (a retry could be written twice).
func TestTxWindowReadsADamagedSegmentsCopy(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote(), cache: 64 << 10}
	s := f.open(t)
	f.append(t, s, 600)
	f.remote.ship(t, s)
	id := segmentHolding(t, s, 300)
	first := segmentFirst(t, s, id)
	s.Close()
	flipSegment(t, f.fs, f.dir, id)

	s = f.open(t) // no heal check: nothing replaces the file
	if res, err := s.Append(f.want[first-1]); err != nil || !res.Duplicate || res.Seq != first {
		t.Fatalf("a retry of event %d of the damaged segment: %+v, %v", first, res, err)
	}
	if p, err := s.Scan(uint64(len(f.want)-5), 10); err != nil || len(p.Records) != 5 {
		t.Fatalf("a read past the damaged segment: %d records, %v", len(p.Records), err)
	}
	if _, err := s.Scan(first-1, len(f.want)); !errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("a read of the damaged segment with nothing to heal it: %v", err)
	}
	if s.IsEvicted(id) || s.RemoteStats().Healed != 0 {
		t.Fatalf("the open changed the damaged segment: %+v", s.RemoteStats())
	}
	s.Close()

	f.remote.fail = errors.New("injected: the bucket is down")
	s = f.open(t)
	if _, err := s.Append(f.want[first-1]); !errors.Is(err, localseg.ErrPoisoned) {
		t.Fatalf("an append with the window incomplete: %v, want it refused", err)
	}
	s.Close()
}
