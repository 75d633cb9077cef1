package localseg_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/bucketlog/bucketlog/localseg"
)

// importFixture builds a store of many sealed segments, ships them to a
// fake bucket, and returns a second directory holding only the newest
// local segments plus what ImportEvicted is to be given for the rest.
func importFixture(t *testing.T, keep int) (*evictFixture, string, []localseg.EvictedSegment) {
	return importFixtureWith(t, keep, func(f *evictFixture, s *localseg.Store) { f.append(t, s, 600) })
}

// importFixtureWith is importFixture with the events fill appends.
func importFixtureWith(t *testing.T, keep int, fill func(*evictFixture, *localseg.Store)) (*evictFixture, string, []localseg.EvictedSegment) {
	t.Helper()
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
	s := f.open(t)
	fill(f, s)
	if _, err := s.Pull("reader", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack("reader", 100); err != nil {
		t.Fatal(err)
	}
	f.remote.ship(t, s)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := snap.Segments
	if len(segs) < keep+3 {
		t.Fatalf("only %d segments", len(segs))
	}
	dst := t.TempDir()
	var imp []localseg.EvictedSegment
	for i, sg := range segs {
		b, err := os.ReadFile(filepath.Join(f.dir, localseg.SegmentFileName(sg.ID)))
		if err != nil {
			t.Fatal(err)
		}
		if i < len(segs)-keep {
			first := sg.FirstSeq
			if sg.Events == 0 {
				first = 0
			}
			imp = append(imp, localseg.EvictedSegment{ID: sg.ID, Size: int64(len(b)), XXH64: xxhash.Sum64(b), First: first})
			continue
		}
		if err := localseg.WriteSegmentFile(localseg.OSFS{}, dst, sg.ID, b); err != nil {
			t.Fatal(err)
		}
	}
	return f, dst, imp
}

// TestImportEvictedReadsFromTheBucket: a store whose older segments were
// never on this disk (imported as evicted) opens, reads every event back
// byte for byte from the bucket, and appends.
func TestImportEvictedReadsFromTheBucket(t *testing.T) {
	f, dst, imp := importFixture(t, 3)
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	f.dir = dst
	s := f.open(t)
	defer s.Close()
	for _, e := range imp {
		if !s.IsEvicted(e.ID) {
			t.Fatalf("segment %d is not evicted", e.ID)
		}
	}
	f.append(t, s, 5)
	f.check(t, s, 0)
}

// TestImportEvictedWrongDigestRefused is the RED control: an entry whose
// digest is not the bucket object's makes every read of it refuse
// (ErrRemoteRead), never a page of other bytes.
func TestImportEvictedWrongDigestRefused(t *testing.T) {
	f, dst, imp := importFixture(t, 3)
	imp[0].XXH64 ^= 1
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	f.dir = dst
	s, err := localseg.Open(dst, f.options())
	if err == nil {
		defer s.Close()
		_, err = s.Scan(0, 10)
	}
	if !errors.Is(err, localseg.ErrRemoteRead) {
		t.Fatalf("a wrong digest: %v, want ErrRemoteRead", err)
	}
}

// TestImportEvictedRefusals: bad input and a segment on disk are refused
// before anything is written.
func TestImportEvictedRefusals(t *testing.T) {
	_, dst, imp := importFixture(t, 3)
	onDisk := append(append([]localseg.EvictedSegment(nil), imp...), localseg.EvictedSegment{ID: imp[len(imp)-1].ID + 1, Size: 10, First: 0})
	swapped := append([]localseg.EvictedSegment(nil), imp...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	firsts := append([]localseg.EvictedSegment(nil), imp...)
	firsts[1].First = firsts[0].First
	zero := append([]localseg.EvictedSegment(nil), imp...)
	zero[0].Size = 0
	for name, c := range map[string]struct {
		segs []localseg.EvictedSegment
		want error
	}{
		"none":    {nil, localseg.ErrInvalidInput},
		"on disk": {onDisk, localseg.ErrInvalidState},
		"ids":     {swapped, localseg.ErrInvalidInput},
		"firsts":  {firsts, localseg.ErrInvalidInput},
		"size":    {zero, localseg.ErrInvalidInput},
	} {
		if err := localseg.ImportEvicted(localseg.OSFS{}, dst, c.segs); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", name, err, c.want)
		}
		if _, err := os.Stat(filepath.Join(dst, "evicted.json")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: evicted.json written by a refused import", name)
		}
	}
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("a second import: %v, want ErrInvalidState", err)
	}
}

// lazyStore imports the fixture's older segments as evicted and writes the
// imported checkpoint with consumer "reader" at 100.
func lazyStore(t *testing.T, keep int) (*evictFixture, []localseg.EvictedSegment) {
	t.Helper()
	f, dst, imp := importFixture(t, keep)
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, map[string]uint64{"reader": 100}); err != nil {
		t.Fatal(err)
	}
	f.dir = dst
	return f, imp
}

func openWindow(t *testing.T, f *evictFixture, window int) *localseg.Store {
	t.Helper()
	o := f.options()
	o.TransactionWindow = window
	s, err := localseg.Open(f.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fetchedTotal(r *fakeRemote) (n int, ids []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, c := range r.fetched {
		n += c
		ids = append(ids, id)
	}
	return n, ids
}

// TestImportCheckpointOpensWithoutFetching: with the imported checkpoint
// the open replays nothing and fetches no evicted segment while the local
// segments cover the transaction window; the tip and the consumers are
// right, and every old event reads back from the bucket.
func TestImportCheckpointOpensWithoutFetching(t *testing.T) {
	f, _ := lazyStore(t, 3)
	s := openWindow(t, f, 10)
	defer s.Close()
	if n, _ := fetchedTotal(f.remote); n != 0 {
		t.Fatalf("the open fetched %d evicted segments", n)
	}
	if got := s.Tip(); got != uint64(len(f.want)) {
		t.Fatalf("tip %d, want %d", got, len(f.want))
	}
	pr, err := s.Pull("reader", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Records) != 1 || pr.Records[0].Seq != 101 {
		t.Fatalf("pull after the imported cursor 100: %+v", pr.Records)
	}
	f.append(t, s, 5)
	f.check(t, s, 0)
}

// TestImportCheckpointWindowFetchesNewest: a transaction window larger than
// the local segments is filled at open from the newest evicted segments
// only (never the whole history), and a retry of an event held only in
// the bucket is a duplicate, not a second write.
func TestImportCheckpointWindowFetchesNewest(t *testing.T) {
	f, imp := lazyStore(t, 2)
	s := openWindow(t, f, 150)
	defer s.Close()
	n, ids := fetchedTotal(f.remote)
	if n == 0 || n >= len(imp) {
		t.Fatalf("the window's rebuild fetched %d of %d evicted segments (%v)", n, len(imp), ids)
	}
	for _, id := range ids {
		if id < imp[len(imp)-n].ID {
			t.Fatalf("the window's rebuild fetched segment %d, not one of the newest %d", id, n)
		}
	}
	old := f.want[len(f.want)-140]
	res, err := s.Append(old)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate || res.Seq != uint64(len(f.want)-139) {
		t.Fatalf("a retry of sequence %d: %+v", len(f.want)-139, res)
	}
}

// TestImportCheckpointRefusals: a consumer past the tip, a second
// checkpoint and a directory without evicted.json are refused.
func TestImportCheckpointRefusals(t *testing.T) {
	_, dst, imp := importFixture(t, 3)
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, nil); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("no evicted.json: %v", err)
	}
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, map[string]uint64{"r": 601}); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("a consumer past the tip: %v", err)
	}
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, map[string]uint64{"r": 600}); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, nil); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("a second checkpoint: %v", err)
	}
}
