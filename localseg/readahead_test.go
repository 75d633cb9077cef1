package localseg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
)

// readAheadFixture is a store of 4 KiB segments whose sealed ones, but the
// newest, are evicted, with a remote cache of two segments.
func readAheadFixture(t *testing.T) (*evictFixture, *localseg.Store, []uint64) {
	t.Helper()
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote(), cache: 8 << 10}
	s := f.open(t)
	t.Cleanup(func() { s.Close() })
	f.append(t, s, 900)
	f.remote.ship(t, s)
	res, err := s.Evict(4<<10, f.remote.has)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evicted) < 6 {
		t.Fatalf("evicted %v: too few to read ahead", res.Evicted)
	}
	return f, s, res.Evicted
}

// A scan over evicted segments fetches the next one before it reaches it,
// and each segment exactly once however pages fall across segments.
func TestScanReadsAheadOnce(t *testing.T) {
	for _, page := range []int{7, 40, 97, 300} {
		t.Run(fmt.Sprint("page ", page), func(t *testing.T) {
			f, s, evicted := readAheadFixture(t)
			var after uint64
			for after < uint64(len(f.want)) {
				p, err := s.Scan(after, page)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range p.Records {
					f.same(t, "scan", r)
				}
				after = p.Records[len(p.Records)-1].Seq
			}
			st := s.RemoteStats()
			f.remote.mu.Lock()
			defer f.remote.mu.Unlock()
			for _, id := range evicted {
				if n := f.remote.fetched[id]; n != 1 {
					t.Errorf("segment %d fetched %d times, want once (fetched %v; stats %+v)", id, n, f.remote.fetched, st)
				}
			}
			if st.ReadAheads == 0 || st.Fetches != int64(len(evicted)) {
				t.Fatalf("%d read-aheads, %d fetches of %d evicted segments", st.ReadAheads, st.Fetches, len(evicted))
			}
		})
	}
}

// BenchmarkScanEvicted scans 60 MiB of evicted 4 MiB segments of 1 KiB
// events from an in-memory remote (no network: what the store's own
// checks and decoding cost), with a cache of two segments as the tier
// bench has.
func BenchmarkScanEvicted(b *testing.B) {
	f := &evictFixture{dir: b.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote(), cache: 8 << 20}
	s, err := localseg.Open(f.dir, localseg.Options{SegmentMaxBytes: 4 << 20, NoPreallocate: true, Remote: f.remote, RemoteCacheBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := strings.Repeat("p", 1024)
	batch := make([]localseg.Event, 64)
	for n := 0; n < 64<<10; n += len(batch) {
		for i := range batch {
			batch[i] = localseg.Event{ExecutionID: fmt.Sprint("x", n/64), TransactionID: fmt.Sprint("t", n+i), Payload: payload}
		}
		if _, _, err := s.AppendBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
	f.remote.ship(b, s)
	res, err := s.Evict(4<<20, f.remote.has)
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for _, id := range res.Evicted {
		bytes += int64(len(f.remote.objs[id]))
	}
	last := uint64(0)
	snap, _ := s.Snapshot()
	for _, seg := range snap.Segments {
		if s.IsEvicted(seg.ID) {
			last = seg.LastSeq
		}
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	for range b.N {
		for after := uint64(0); after < last; {
			p, err := s.Scan(after, 4096)
			if err != nil {
				b.Fatal(err)
			}
			after = p.Records[len(p.Records)-1].Seq
		}
	}
	b.StopTimer()
	if st := s.RemoteStats(); st.Fetches != int64(b.N*len(res.Evicted)) {
		b.Fatalf("%d fetches in %d scans of %d evicted segments: %v", st.Fetches, b.N, len(res.Evicted), f.remote.fetched)
	}
}

// fetchedOf is how many times the fake bucket served segment id.
func fetchedOf(r *fakeRemote, id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fetched[id]
}

// A page's read starts the fetch of the evicted segment after its last
// one before anything asks for it; a per-execution read never does.
func TestReadAheadStartsBeforeTheScanArrives(t *testing.T) {
	f, s, evicted := readAheadFixture(t)
	for e := range 7 {
		if _, err := s.ReadExecution(fmt.Sprint(e), 0, 3); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.RemoteStats(); st.ReadAheads != 0 {
		t.Fatalf("per-execution reads started %d read-aheads", st.ReadAheads)
	}
	f, s, evicted = readAheadFixture(t)
	p, err := s.Scan(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.same(t, "scan", p.Records[0])
	next := evicted[1]
	deadline := time.Now().Add(10 * time.Second)
	for fetchedOf(f.remote, next) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a scan of segment %d never fetched segment %d ahead (stats %+v)", evicted[0], next, s.RemoteStats())
		}
		time.Sleep(time.Millisecond)
	}
	// The read that reaches it takes the read-ahead's bytes: no second GET.
	for after := uint64(0); after < uint64(len(f.want)); {
		p, err := s.Scan(after, 5)
		if err != nil {
			t.Fatal(err)
		}
		after = p.Records[len(p.Records)-1].Seq
	}
	if n := fetchedOf(f.remote, next); n != 1 {
		t.Fatalf("segment %d fetched %d times", next, n)
	}
}

// A read-ahead that fails is forgotten: the scan that reaches the segment
// fetches it itself, and reports the bucket's failure only when its own
// fetch fails too.
func TestFailedReadAheadIsFetchedAgain(t *testing.T) {
	f, s, evicted := readAheadFixture(t)
	next := evicted[1]
	var calls atomic.Int32
	f.remote.before = func(_ context.Context, id uint64) error {
		if id == next && calls.Add(1) == 1 {
			return errors.New("503 slow down")
		}
		return nil
	}
	if _, err := s.Scan(0, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() == 0 || s.RemoteStats().ReadAheads == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no read-ahead of the next segment")
		}
		time.Sleep(time.Millisecond)
	}
	f.check(t, s, 0)
	if calls.Load() < 2 {
		t.Fatalf("segment %d was asked for %d times: the failed read-ahead's error stood for the read", next, calls.Load())
	}
	// With the bucket failing for good, the scan's error is the bucket's.
	f2, s2, ev2 := readAheadFixture(t)
	f2.remote.before = func(_ context.Context, id uint64) error {
		if id == ev2[1] {
			return errors.New("503 slow down")
		}
		return nil
	}
	var err error
	for after := uint64(0); err == nil && after < uint64(len(f2.want)); {
		var p localseg.Page
		if p, err = s2.Scan(after, 5); err == nil {
			after = p.Records[len(p.Records)-1].Seq
		}
	}
	if !errors.Is(err, localseg.ErrRemoteRead) || errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("a scan with segment %d failing: %v, want ErrRemoteRead", ev2[1], err)
	}
}

// Close ends a read-ahead still waiting on the bucket (goleak, in
// TestMain, sees a goroutine left behind).
func TestCloseEndsAReadAhead(t *testing.T) {
	f, s, evicted := readAheadFixture(t)
	started := make(chan struct{})
	var once sync.Once
	f.remote.before = func(ctx context.Context, id uint64) error {
		if id != evicted[1] {
			return nil
		}
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	}
	if _, err := s.Scan(0, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no read-ahead started")
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for a read-ahead the bucket never answers")
	}
}

// The cached copy of an evicted segment is read in place, never used as
// a buffer: scans in pages of every size, then again from the cache,
// return the same bytes.
func TestVerifiedCopyIsNeverWritten(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote(), cache: 1 << 20}
	s := f.open(t)
	defer s.Close()
	f.append(t, s, 600)
	f.remote.ship(t, s)
	if _, err := s.Evict(0, f.remote.has); err != nil {
		t.Fatal(err)
	}
	for _, page := range []int{1, 3, 50, 1000, 2} {
		for after := uint64(0); after < uint64(len(f.want)); {
			p, err := s.Scan(after, page)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Records {
				f.same(t, fmt.Sprint("scan in pages of ", page), r)
			}
			after = p.Records[len(p.Records)-1].Seq
		}
	}
	f.check(t, s, 0)
	if st := s.RemoteStats(); st.CacheHits == 0 {
		t.Fatalf("nothing read from the cache: %+v", st)
	}
}

// A read that takes over a read-ahead still in flight, which then fails,
// fetches the segment itself instead of answering the read-ahead's error.
func TestTakenReadAheadThatFailsIsFetchedAgain(t *testing.T) {
	f, s, evicted := readAheadFixture(t)
	next := evicted[1]
	release := make(chan struct{})
	var calls atomic.Int32
	f.remote.before = func(_ context.Context, id uint64) error {
		if id == next && calls.Add(1) == 1 {
			<-release
			return errors.New("503 slow down")
		}
		return nil
	}
	p, err := s.Scan(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var nextFirst uint64
	for _, seg := range snap.Segments {
		if seg.ID == next {
			nextFirst = seg.FirstSeq
		}
	}
	_ = p
	got := make(chan error, 1)
	go func() {
		p, err := s.Scan(nextFirst-1, 3) // the page is in segment next
		if err == nil {
			for _, r := range p.Records {
				if r.Seq < nextFirst {
					err = fmt.Errorf("record %d before %d", r.Seq, nextFirst)
				}
			}
		}
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !localseg.ReadAheadInFlightForTest(s, next) {
		if time.Now().After(deadline) {
			t.Fatal("the scan never took over the read-ahead")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the scan is waiting on it now
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("the scan answered the failed read-ahead's error: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("segment %d asked for %d times, want the read-ahead and one fetch", next, calls.Load())
	}
}

// A page read in parallel parts holds the cached segments it covers: a
// fetch by one part cannot push out of the cache a segment the other part
// has yet to read (each segment is fetched once).
func TestParallelPageHoldsItsCachedSegments(t *testing.T) {
	const seg = 256 << 10
	r := newFakeRemote()
	s, err := localseg.Open(t.TempDir(), localseg.Options{SegmentMaxBytes: seg, NoPreallocate: true, Remote: r, RemoteCacheBytes: 2 * seg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	payload := strings.Repeat("v", 1000)
	for i := range 1700 {
		exec := "p"
		if i >= 1200 {
			exec = "q"
		}
		if _, err := s.Append(localseg.Event{ExecutionID: exec, TransactionID: fmt.Sprint("t", i), Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	r.ship(t, s)
	if _, err := s.Evict(0, r.has); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	segs := snap.Segments
	if len(segs) < 7 || !s.IsEvicted(segs[5].ID) {
		t.Fatalf("want at least 6 evicted segments: %+v", segs)
	}
	a, b, d := segs[0], segs[1], segs[3]
	// a read, b fetched ahead and left in its slot.
	if _, err := s.Scan(a.LastSeq-1, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fetchedOf(r, b.ID) == 0 || s.RemoteStats().Fetches < 2 {
		if time.Now().After(deadline) {
			t.Fatal("segment b was not read ahead")
		}
		time.Sleep(time.Millisecond)
	}
	// Other segments push a out of the cache.
	if _, err := s.ReadExecution("q", 0, 1000); err != nil {
		t.Fatal(err)
	}
	// The page a..d: the part reading a (slow to fetch now) reads b only
	// after the other part fetched c and d.
	r.before = func(_ context.Context, id uint64) error {
		if id != a.ID {
			return nil
		}
		for fetchedOf(r, d.ID) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		return nil
	}
	p, err := s.Scan(a.FirstSeq-1, int(d.LastSeq-a.FirstSeq+1))
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(p.Records)) != d.LastSeq-a.FirstSeq+1 {
		t.Fatalf("%d records", len(p.Records))
	}
	if n := fetchedOf(r, b.ID); n != 1 {
		t.Fatalf("segment %d (b) fetched %d times: the page's other part pushed it out before it was read", b.ID, n)
	}
}
