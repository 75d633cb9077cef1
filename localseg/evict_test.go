package localseg_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// fakeRemote is a bucket of segment copies for the eviction tests.
type fakeRemote struct {
	mu      sync.Mutex
	objs    map[uint64][]byte
	fail    error
	fetched map[uint64]int
	// before, when set, runs first on every fetch (outside mu); its error
	// is the fetch's.
	before func(ctx context.Context, id uint64) error
}

func newFakeRemote() *fakeRemote {
	return &fakeRemote{objs: map[uint64][]byte{}, fetched: map[uint64]int{}}
}

func (r *fakeRemote) FetchSegment(ctx context.Context, id uint64) ([]byte, uint64, error) {
	if r.before != nil {
		if err := r.before(ctx, id); err != nil {
			return nil, 0, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return nil, 0, r.fail
	}
	r.fetched[id]++
	b, ok := r.objs[id]
	if !ok {
		return nil, 0, fmt.Errorf("no object for segment %d", id)
	}
	return append([]byte(nil), b...), xxhash.Sum64(b), nil
}

func (r *fakeRemote) has(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.objs[id]
	return ok
}

// ship copies every sealed segment into the fake bucket ("durable").
func (r *fakeRemote) ship(t testing.TB, s *localseg.Store) {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range snap.Segments {
		if !seg.Sealed || r.has(seg.ID) || s.IsEvicted(seg.ID) {
			continue
		}
		b, err := s.ReadSegment(seg.ID)
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.objs[seg.ID] = b
		r.mu.Unlock()
	}
}

type evictFixture struct {
	dir    string
	fs     localseg.FS
	remote *fakeRemote
	want   []localseg.Event
	cache  int64 // RemoteCacheBytes (0: 16 KiB)
}

func (f *evictFixture) options() localseg.Options {
	return localseg.Options{FS: f.fs, SegmentMaxBytes: 4 << 10, NoPreallocate: true, Remote: f.remote, RemoteCacheBytes: cmp.Or(f.cache, 16<<10)}
}

func (f *evictFixture) open(t *testing.T) *localseg.Store {
	t.Helper()
	s, err := localseg.Open(f.dir, f.options())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *evictFixture) append(t *testing.T, s *localseg.Store, n int) {
	t.Helper()
	for range n {
		i := len(f.want)
		ev := localseg.Event{ExecutionID: fmt.Sprint(i % 7), TransactionID: fmt.Sprint("t", i), Payload: strings.Repeat(fmt.Sprint(i), 1+i%40)}
		if _, err := s.Append(ev); err != nil {
			t.Fatal(err)
		}
		f.want = append(f.want, ev)
	}
}

// check reads every event back through a scan, per-execution reads, point
// reads and a consumer pull, byte for byte.
func (f *evictFixture) check(t *testing.T, s *localseg.Store, base uint64) {
	t.Helper()
	p, err := s.Scan(base, len(f.want)+1)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if len(p.Records) != len(f.want)-int(base) {
		t.Fatalf("scan: %d records, want %d", len(p.Records), len(f.want)-int(base))
	}
	for i, r := range p.Records {
		f.same(t, "scan", r)
		if r.Seq != base+uint64(i)+1 {
			t.Fatalf("scan: record %d has sequence %d", i, r.Seq)
		}
	}
	for e := range 7 {
		p, err := s.ReadExecution(fmt.Sprint(e), base, len(f.want))
		if err != nil {
			t.Fatalf("read execution %d: %v", e, err)
		}
		n := 0
		for i := int(base); i < len(f.want); i++ {
			if f.want[i].ExecutionID == fmt.Sprint(e) {
				n++
			}
		}
		if len(p.Records) != n {
			t.Fatalf("execution %d: %d records, want %d", e, len(p.Records), n)
		}
		for _, r := range p.Records {
			f.same(t, "execution read", r)
		}
	}
	for seq := base + 1; seq <= uint64(len(f.want)); seq += 13 {
		r, err := s.Get(seq)
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		f.same(t, "get", r)
	}
	if pr, err := s.Pull("reader", len(f.want)); err == nil {
		for _, r := range pr.Records {
			f.same(t, "pull", r)
		}
		if len(pr.Records) == 0 && pr.Acked < uint64(len(f.want)) {
			t.Fatalf("pull returned nothing with %d events pending", pr.Pending)
		}
	} else if !errors.Is(err, localseg.ErrReadOnly) {
		t.Fatalf("pull: %v", err)
	}
}

func (f *evictFixture) same(t *testing.T, how string, r localseg.Record) {
	t.Helper()
	w := f.want[r.Seq-1]
	if r.ExecutionID != w.ExecutionID || r.TransactionID != w.TransactionID || r.Payload != w.Payload {
		t.Fatalf("%s: sequence %d reads %+v, want %+v", how, r.Seq, r, w)
	}
}

func evictSegFiles(t *testing.T, dir string) (segs, idxs int) {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		switch {
		case strings.HasSuffix(n.Name(), ".eslog"):
			segs++
		case strings.HasSuffix(n.Name(), ".idx"):
			idxs++
		}
	}
	return segs, idxs
}

// TestEvictReadsFromTheBucket: sealed segments durable in the bucket leave
// the disk beyond the budget (their index files stay), every event still
// reads back byte for byte through every read path (also after a restart,
// with and without a trusted checkpoint), and a per-execution read fetches
// only the segments holding that execution.
func TestEvictReadsFromTheBucket(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
	s := f.open(t)
	f.append(t, s, 600)
	f.remote.ship(t, s)
	before, _ := evictSegFiles(t, f.dir)
	res, err := s.Evict(8<<10, f.remote.has)
	if err != nil {
		t.Fatal(err)
	}
	after, idxs := evictSegFiles(t, f.dir)
	if len(res.Evicted) == 0 || after != before-len(res.Evicted) || res.LocalSealed > 8<<10 || res.Overshoot != 0 {
		t.Fatalf("evicted %v: %d segment files before, %d after, %d sealed bytes left, overshoot %d", res.Evicted, before, after, res.LocalSealed, res.Overshoot)
	}
	if idxs < len(res.Evicted) {
		t.Fatalf("%d index files for %d evicted segments", idxs, len(res.Evicted))
	}
	f.check(t, s, 0)
	// Appends go on; a restart keeps the evicted state.
	f.append(t, s, 50)
	s.Close()
	for _, ckpt := range []bool{true, false} {
		if !ckpt {
			os.Remove(filepath.Join(f.dir, "checkpoint.json"))
		}
		s = f.open(t)
		for _, id := range res.Evicted {
			if !s.IsEvicted(id) {
				t.Fatalf("segment %d is no longer evicted after a restart", id)
			}
		}
		f.check(t, s, 0)
		s.Close()
	}
	// A per-execution read of a fresh store fetches only the segments that
	// hold the execution (the index files say which).
	s = f.open(t)
	defer s.Close()
	st0 := s.RemoteStats()
	if _, err := s.ReadExecution("3", 0, 1); err != nil {
		t.Fatal(err)
	}
	if st := s.RemoteStats(); st.CacheHits+st.CacheMisses-st0.CacheHits-st0.CacheMisses != 1 {
		t.Fatalf("a per-execution read of one record read %d evicted segments", st.CacheHits+st.CacheMisses-st0.CacheHits-st0.CacheMisses)
	}
}

// TestEvictOnlyDurable: a segment the bucket does not hold stays, and so
// does every later one (the contiguous rule); the overshoot is reported.
func TestEvictOnlyDurable(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
	s := f.open(t)
	defer s.Close()
	f.append(t, s, 400)
	f.remote.ship(t, s)
	snap, _ := s.Snapshot()
	hole := snap.Segments[2].ID
	delete(f.remote.objs, hole)
	res, err := s.Evict(0, f.remote.has)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evicted) != 2 || res.Overshoot == 0 {
		t.Fatalf("evicted %v, overshoot %d: want the two segments below the one the bucket lacks, and an overshoot", res.Evicted, res.Overshoot)
	}
	f.check(t, s, 0)
}

// TestEvictRedControlUndurable is the RED control: evicting a segment the
// bucket does not hold (the unsafe switch skips the durable check) loses
// its events, and the read-back check finds it.
func TestEvictRedControlUndurable(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
	s := f.open(t)
	defer s.Close()
	f.append(t, s, 300)
	defer localseg.SetUnsafeEvictAny(true)()
	res, err := s.Evict(0, f.remote.has)
	if err != nil || len(res.Evicted) == 0 {
		t.Fatalf("evicted %v, %v", res.Evicted, err)
	}
	if _, err := s.Scan(0, 1000); !errors.Is(err, localseg.ErrRemoteRead) {
		t.Fatalf("scan over segments evicted without a bucket copy: %v, want ErrRemoteRead (the loss)", err)
	}
}

// TestEvictRemoteFailure: a bucket failure during a read of an evicted
// segment is ErrRemoteRead, never corruption, never a short page; the
// reads work again once the bucket answers, and a damaged copy is refused.
func TestEvictRemoteFailure(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote(), cache: 1}
	s := f.open(t)
	defer s.Close()
	f.append(t, s, 300)
	f.remote.ship(t, s)
	if _, err := s.Evict(0, f.remote.has); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = f.open(t)
	f.remote.fail = errors.New("503 slow down")
	for i, read := range []func() error{
		func() error { _, err := s.Scan(0, 1000); return err },
		func() error { _, err := s.ReadExecution("1", 0, 1000); return err },
		func() error { _, err := s.Get(1); return err },
		func() error { _, err := s.Pull("c", 1000); return err },
	} {
		err := read()
		if !errors.Is(err, localseg.ErrRemoteRead) || errors.Is(err, localseg.ErrCorrupt) {
			t.Fatalf("read %d with the bucket failing: %v, want ErrRemoteRead and not ErrCorrupt", i, err)
		}
	}
	f.remote.fail = nil
	f.check(t, s, 0)
	s.Close()
	// A copy whose bytes are not the evicted ones is refused.
	for id, b := range f.remote.objs {
		b[len(b)/2] ^= 1
		f.remote.objs[id] = b
	}
	s = f.open(t)
	if _, err := s.Scan(0, 1000); !errors.Is(err, localseg.ErrRemoteRead) {
		t.Fatalf("scan over a damaged bucket copy: %v", err)
	}
	// The transaction window could not be rebuilt: writes are refused
	// (a retry of an evicted event's id must not be written twice).
	if _, err := s.Append(localseg.Event{ExecutionID: "1", TransactionID: "t0", Payload: "again"}); !errors.Is(err, localseg.ErrPoisoned) || !errors.Is(err, localseg.ErrRemoteRead) {
		t.Fatalf("append with the window incomplete: %v", err)
	}
	s.Close()
}

// TestEvictThenReclaim: GC of an evicted range removes it like any other
// (the events are gone, reads clamp to the base) and a reopen accepts the
// stale entries evicted.json still holds.
func TestEvictThenReclaim(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
	s := f.open(t)
	f.append(t, s, 400)
	f.remote.ship(t, s)
	res, err := s.Evict(4<<10, f.remote.has)
	if err != nil || len(res.Evicted) < 3 {
		t.Fatalf("evicted %v, %v", res.Evicted, err)
	}
	through := res.Evicted[1]
	rr, err := s.Reclaim(through)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Removed) != 2 {
		t.Fatalf("reclaim removed %v, want the two evicted segments", rr.Removed)
	}
	if _, err := s.Get(1); !errors.Is(err, localseg.ErrReclaimed) {
		t.Fatalf("get of a reclaimed evicted event: %v, want ErrReclaimed", err)
	}
	f.check(t, s, rr.ThroughSeq)
	s.Close()
	s = f.open(t)
	defer s.Close()
	f.check(t, s, rr.ThroughSeq)
	if s.IsEvicted(through) || !s.IsEvicted(res.Evicted[2]) {
		t.Fatal("after a restart the reclaimed segments count as evicted, or the others do not")
	}
}

// TestEvictLostEvidence: a missing segment file is accepted only when
// evicted.json names it; a record naming the active segment, or a record
// that does not parse, refuses the open.
func TestEvictLostEvidence(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
	s := f.open(t)
	f.append(t, s, 400)
	f.remote.ship(t, s)
	res, err := s.Evict(8<<10, f.remote.has)
	if err != nil || len(res.Evicted) == 0 {
		t.Fatalf("evicted %v, %v", res.Evicted, err)
	}
	snap, _ := s.Snapshot()
	s.Close()
	next := res.Evicted[len(res.Evicted)-1] + 1
	p := filepath.Join(f.dir, localseg.SegmentFileName(next))
	b, _ := os.ReadFile(p)
	os.Remove(p)
	if _, err := localseg.Open(f.dir, f.options()); !errors.Is(err, localseg.ErrCorrupt) && !errors.Is(err, localseg.ErrLostState) {
		t.Fatalf("open without segment %d, which is not evicted: %v", next, err)
	}
	os.WriteFile(p, b, 0o644)
	rec := filepath.Join(f.dir, "evicted.json")
	good, _ := os.ReadFile(rec)
	active := snap.Segments[len(snap.Segments)-1].ID
	os.WriteFile(rec, []byte(strings.Replace(string(good), "]}", fmt.Sprintf(`,{"id":%d,"size":10,"xxh64":"0000000000000001","first":1}]}`, active), 1)), 0o644)
	if _, err := localseg.Open(f.dir, f.options()); !errors.Is(err, localseg.ErrLostState) {
		t.Fatalf("open with the active segment recorded evicted: %v", err)
	}
	os.WriteFile(rec, good[:len(good)/2], 0o644)
	if _, err := localseg.Open(f.dir, f.options()); !errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("open with a torn evicted.json: %v", err)
	}
	os.WriteFile(rec, good, 0o644)
	s = f.open(t)
	f.check(t, s, 0)
	s.Close()
}

// TestEvictCrashSweep crashes at every write-class operation of an
// eviction (and then tears what was not synced): every clone opens and
// reads every event back, evicted or not.
func TestEvictCrashSweep(t *testing.T) {
	points := 0
	for k := int64(0); ; k++ {
		mem := faultfs.NewMemFS()
		crash := faultfs.CrashAt(k)
		tog := faultfs.NewToggle(crash, false)
		f := &evictFixture{dir: "/shard", fs: faultfs.Wrap(mem, tog), remote: newFakeRemote()}
		s := f.open(t)
		f.append(t, s, 300)
		f.remote.ship(t, s)
		tog.On()
		_, err := s.Evict(4<<10, f.remote.has)
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
			f.check(t, s, 0)
			// The open swept what a crashed eviction left, and evicting
			// again works.
			if _, err := s.Evict(4<<10, f.remote.has); err != nil {
				t.Fatalf("crash point %d seed %d: evict again: %v", k, seed, err)
			}
			f.check(t, s, 0)
			s.Close()
		}
	}
	if points < 5 {
		t.Fatalf("only %d crash points inside an eviction", points)
	}
	t.Logf("crash points inside an eviction: %d", points)
}

// TestEvictConcurrentReads evicts while appends and reads run: no read
// fails or differs (a read that finds the file gone goes to the bucket).
func TestEvictConcurrentReads(t *testing.T) {
	f := &evictFixture{dir: t.TempDir(), fs: localseg.OSFS{}, remote: newFakeRemote()}
	s := f.open(t)
	defer s.Close()
	f.append(t, s, 200)
	want := slices.Clone(f.want)
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				var recs []localseg.Record
				if g == 0 {
					p, err := s.Scan(0, len(want))
					if err != nil {
						errs <- err
						return
					}
					recs = p.Records
				} else {
					p, err := s.ReadExecution("2", 0, len(want))
					if err != nil {
						errs <- err
						return
					}
					recs = p.Records
				}
				for _, r := range recs {
					if r.Seq <= uint64(len(want)) && want[r.Seq-1].Payload != r.Payload {
						errs <- fmt.Errorf("sequence %d reads %q", r.Seq, r.Payload)
						return
					}
				}
			}
		})
	}
	for range 20 {
		f.append(t, s, 20)
		f.remote.ship(t, s)
		if _, err := s.Evict(4<<10, f.remote.has); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	f.check(t, s, 0)
}
