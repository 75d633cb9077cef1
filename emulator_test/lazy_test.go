package emulator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
)

// getCounter counts the GETs of segment objects (issue 16: a lazy
// takeover reads O(budget) of them, not O(history)).
type getCounter struct {
	blobtier.Bucket
	mu     sync.Mutex
	segs   map[string]int
	ranges int
}

func (g *getCounter) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	if strings.Contains(key, ".seg.") {
		g.mu.Lock()
		g.segs[key]++
		g.mu.Unlock()
	}
	return g.Bucket.Get(ctx, key)
}

// GetRange forwards a ranged read (a lazy hydrate reads the heads of the
// remote segments) and counts it apart: it is not a segment fetch.
func (g *getCounter) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	g.mu.Lock()
	g.ranges++
	g.mu.Unlock()
	return g.Bucket.GetRange(ctx, key, off, n)
}

// evictedFetched counts the GETs of the segments imp names.
func (g *getCounter) evictedFetched(imp []localseg.EvictedSegment) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, e := range imp {
		n += g.segs[blobtier.SegmentKey(0, e.ID)]
	}
	return n
}

func (g *getCounter) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.segs {
		n += c
	}
	return n
}

// lazyDir builds, from the bucket, the directory a lazy hydrate leaves for
// shard 0 (the slice of issue 16 this hook serves): the newest keep
// segment objects as files, an empty active segment above them, the older
// ones recorded as evicted (localseg.ImportEvicted: length and xxh64 as the
// bucket's metadata has them, first event from the object) and the
// imported checkpoint. corrupt flips the digest of the oldest entry.
func lazyDir(t *testing.T, b blobtier.Bucket, dir string, keep int, corrupt bool) []localseg.EvictedSegment {
	t.Helper()
	ctx := ctxT(t)
	segs := objects(t, b, 0, blobtier.KindSegment)
	if len(segs) < keep+4 {
		t.Fatalf("%d segment objects", len(segs))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if first := segs[0].Parsed.Segment; first > 1 {
		// The first owner's ids start at its cut's start segment.
		if err := localseg.RecordJump(localseg.OSFS{}, dir, 1, first); err != nil {
			t.Fatal(err)
		}
	}
	var imp []localseg.EvictedSegment
	for i, o := range segs {
		data, meta, err := b.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		id := o.Parsed.Segment
		if i >= len(segs)-keep {
			if err := localseg.WriteSegmentFile(localseg.OSFS{}, dir, id, data); err != nil {
				t.Fatal(err)
			}
			continue
		}
		sum, err := localseg.VerifySegment(id, data, 0)
		if err != nil {
			t.Fatal(err)
		}
		first := sum.FirstSeq
		if sum.Events == 0 {
			first = 0
		}
		st, err := b.Stat(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Meta.XXH64 != xxhash.Sum64(data) || meta.XXH64 != st.Meta.XXH64 {
			t.Fatalf("segment %d: metadata %016x, bytes %016x", id, st.Meta.XXH64, xxhash.Sum64(data))
		}
		imp = append(imp, localseg.EvictedSegment{ID: id, Size: st.Meta.Length, XXH64: st.Meta.XXH64, First: first})
	}
	if corrupt {
		imp[0].XXH64 ^= 1
	}
	if err := localseg.WriteSegmentFile(localseg.OSFS{}, dir, segs[len(segs)-1].Parsed.Segment+1, nil); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportEvicted(localseg.OSFS{}, dir, imp); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dir, nil); err != nil {
		t.Fatal(err)
	}
	return imp
}

// lazyHistory appends about 1.5 MiB to shard 0 on a first owner, seals and
// ships everything, and closes it.
func lazyHistory(t *testing.T, v *env) ([]string, []localseg.Record, string) {
	t.Helper()
	ctx := ctxT(t)
	opts := bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true}
	l := open(t, opts)
	execs := execsOf(0, 1, 9)
	var want []localseg.Record
	for i := range 1500 {
		e := evictEvent(execs, i)
		res, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
	}
	if _, err := l.Store().Seal(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(l.Dir())
	closeLog(t, l)
	return execs, want, base
}

// TestLazyImportedTakeover: a new owner on a disk holding only the newest
// segments, the older ones imported as evicted, starts (the shipper finds
// every evicted segment in the bucket as recorded), fetches only what the
// transaction window needs while it opens and none while it appends, ships,
// and reads every old event back
// byte for byte from the bucket through scan, per-execution reads, pulls
// and the stream. A bucket failure during such a read is a 503 storage
// error, not corruption.
func TestLazyImportedTakeover(t *testing.T) {
	v := newEnv(t, backends[0], true)
	execs, want, base := lazyHistory(t, v)
	root := t.TempDir()
	imp := lazyDir(t, v.b, filepath.Join(root, base), 4, false)
	g := &getCounter{Bucket: v.b, segs: map[string]int{}}
	opts := bucketlog.Options{Dir: root, Bucket: g, SegmentMaxBytes: evictSegMax, NoBackground: true,
		LocalRetentionBytes: evictBudget, RemoteCacheBytes: 64 << 10, TransactionWindow: 100}
	l := open(t, opts)
	// Of the evicted segments the open fetches only the newest few, which
	// the transaction window (100 events; a segment here holds about 20)
	// needs beyond the local ones.
	if n, all := g.evictedFetched(imp), g.count(); n > 6 || all > 4+n || g.evictedFetched(imp[:len(imp)-6]) != 0 {
		t.Fatalf("the open fetched %d segment objects, %d of them evicted (%v)", all, n, g.segs)
	}
	t.Logf("the open fetched %d segment objects of %d, %d of them evicted (the window's)", g.count(), len(imp)+4, g.evictedFetched(imp))
	atOpen := g.evictedFetched(imp)
	if got := l.Store().RemoteStats().Evicted; got != len(imp) {
		t.Fatalf("%d segments evicted, want %d", got, len(imp))
	}
	ctx := ctxT(t)
	for i, end := len(want), len(want)+50; i < end; i++ {
		e := evictEvent(execs, i)
		res, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
	}
	if n := g.evictedFetched(imp); n != atOpen {
		t.Fatalf("appending fetched %d evicted segment objects", n-atOpen)
	}
	// The first pass that needs the location index (the tail shipping
	// locates its start) builds it lazily: the imported segments, which
	// have no index file, stay pending and are not fetched.
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := g.evictedFetched(imp) - atOpen; n != 0 {
		t.Fatalf("the first ship fetched %d evicted segment objects", n)
	}
	idx := 0
	if names, err := os.ReadDir(l.Dir()); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n.Name(), ".idx") {
				idx++
			}
		}
	}
	t.Logf("the first ship fetched %d evicted segment objects of %d; %d index files on disk after it", g.evictedFetched(imp)-atOpen, len(imp), idx)
	readAllBack(t, l, execs, want)
	if n := g.evictedFetched(imp); n < len(imp) {
		t.Fatalf("reading the history fetched %d segment objects, %d are remote", n, len(imp))
	}

	rule := v.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: blobtier.SegmentKey(0, imp[0].ID)})
	defer v.fb.Remove(rule)
	_, err := l.Scan(ctx, 0, 10)
	if err == nil || bucketlog.HTTPStatus(err) != 503 || errors.Is(err, localseg.ErrCorrupt) || !errors.Is(err, localseg.ErrRemoteRead) {
		t.Fatalf("a read with the bucket failing: %v (status %d), want a storage error that is not corruption", err, bucketlog.HTTPStatus(err))
	}
}

// TestLazyImportedWrongDigest is the RED control: an imported entry whose
// digest is not the bucket object's. The owner's start refuses it (the
// shipper does not find the segment as recorded) or, past the start, every
// read of it refuses; no read presents other bytes.
func TestLazyImportedWrongDigest(t *testing.T) {
	v := newEnv(t, backends[0], true)
	_, _, base := lazyHistory(t, v)
	root := t.TempDir()
	lazyDir(t, v.b, filepath.Join(root, base), 4, true)
	opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true,
		LocalRetentionBytes: evictBudget, TransactionWindow: 100, Logger: quietLogger(t)}
	l, err := bucketlog.Open(ctxT(t), opts)
	if err == nil {
		defer l.Close()
		_, err = l.Scan(ctxT(t), 0, 10)
	}
	if err == nil {
		t.Fatal("an evicted entry with a wrong digest was opened and read")
	}
	t.Logf("refused: %v", err)
}
