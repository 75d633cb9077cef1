package localseg_test

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestLazyIndexFetchesWhatAReadNeeds: a store whose older segments were
// imported as evicted with no index file and no first event (a lazy
// hydrate reads none of them) builds its index without fetching any; a
// read by sequence deep into the history fetches O(log n) of them, a read
// at the start one; a per-execution read fetches each once and leaves
// index files, so after a reopen nothing is fetched again. Every event
// reads back byte for byte throughout.
func TestLazyIndexFetchesWhatAReadNeeds(t *testing.T) {
	f, dst, imp := importFixture(t, 3)
	for i := range imp {
		imp[i].First = 0 // not known to a lazy hydrate
	}
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, map[string]uint64{"reader": 100}); err != nil {
		t.Fatal(err)
	}
	f.dir = dst
	s := openWindow(t, f, 10)
	f.append(t, s, 5)
	fetched := func() int { n, _ := fetchedTotal(f.remote); return n }
	// The index is built by the first read: a page right below the
	// local segments.
	tip := uint64(len(f.want))
	if _, err := s.Scan(tip-10, 5); err != nil {
		t.Fatal(err)
	}
	if n := fetched(); n != 0 {
		t.Fatalf("a scan of local events fetched %d evicted segments", n)
	}
	if pending, _ := s.PendingSegments(); pending != len(imp) {
		t.Fatalf("%d segments pending, want %d", pending, len(imp))
	}
	logn := bits.Len(uint(len(imp))) + 1
	mid := uint64(300)
	p, err := s.Scan(mid-1, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range p.Records {
		f.same(t, "scan", r)
		if r.Seq != mid+uint64(i) {
			t.Fatalf("scan from %d: record %d is %d", mid, i, r.Seq)
		}
	}
	if n := fetched(); n == 0 || n > logn+1 {
		t.Fatalf("a page at event %d of %d segments fetched %d of them, want at most %d", mid, len(imp), n, logn+1)
	}
	t.Logf("a page at event %d fetched %d of %d evicted segments", mid, fetched(), len(imp))
	before, aheads := fetched(), s.RemoteStats().ReadAheads
	if p, err := s.Scan(0, 2); err != nil || len(p.Records) != 2 || p.Records[0].Seq != 1 {
		t.Fatalf("scan from the start: %+v, %v", p.Records, err)
	}
	// The scan may also have started reading the next segment ahead (in
	// the background: counted when it ran, so not exact).
	if n, ra := fetched()-before, s.RemoteStats().ReadAheads-aheads; n < 1 || n > 1+int(ra) {
		t.Fatalf("a page at the start fetched %d segments (%d read ahead), want 1", n, ra)
	}
	if _, err := s.Get(tip / 2); err != nil {
		t.Fatal(err)
	}
	f.check(t, s, 0) // the per-execution reads build the full index
	if pending, _ := s.PendingSegments(); pending != 0 {
		t.Fatalf("%d segments pending after the full index", pending)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.remote.mu.Lock()
	clear(f.remote.fetched)
	f.remote.mu.Unlock()
	s = openWindow(t, f, 10)
	defer s.Close()
	if _, err := s.ReadExecution("0", tip-20, 5); err != nil { // local events
		t.Fatal(err)
	}
	if n := fetched(); n != 0 {
		_, ids := fetchedTotal(f.remote)
		t.Fatalf("after the full index was built once, a reopened store's per-execution read fetched %d segments %v (imported %v)", n, ids, imp)
	}
}

// TestLazyReclaimWaitsForUnknownFirst is a RED control: a reclaim through
// an imported segment whose successor's first event is not known would
// record a wrong reclaim point (the store would report the successors as
// empty and reclaim "through" their events); it is refused and changes
// nothing, and once a full index build has read them it reclaims through
// the right sequence.
func TestLazyReclaimWaitsForUnknownFirst(t *testing.T) {
	f, dst, imp := importFixture(t, 3)
	lastOf := imp[3].First - 1 // the last event of imp[2]
	for i := range imp {
		imp[i].First = 0
	}
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, map[string]uint64{"reader": 100}); err != nil {
		t.Fatal(err)
	}
	f.dir = dst
	s := openWindow(t, f, 10)
	defer s.Close()
	if _, err := s.Reclaim(imp[2].ID); !errors.Is(err, localseg.ErrInvalidState) {
		t.Fatalf("a reclaim through %d before its successor's first is known: %v, want ErrInvalidState", imp[2].ID, err)
	}
	if snap, err := s.Snapshot(); err != nil || snap.ReclaimedSeq != 0 {
		t.Fatalf("a refused reclaim moved the base: %d, %v", snap.ReclaimedSeq, err)
	}
	if _, err := s.ReadExecution("0", 0, 1); err != nil { // the full index
		t.Fatal(err)
	}
	res, err := s.Reclaim(imp[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.ThroughSeq != lastOf {
		t.Fatalf("reclaimed through sequence %d, segment %d ends at %d", res.ThroughSeq, imp[2].ID, lastOf)
	}
}
