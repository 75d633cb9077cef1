package emulator_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// kindGets counts the GETs of segment and index objects by key.
type kindGets struct {
	blobtier.Bucket
	mu   sync.Mutex
	gets map[string]int
}

func (g *kindGets) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	g.mu.Lock()
	g.gets[key]++
	g.mu.Unlock()
	return g.Bucket.Get(ctx, key)
}

// of counts the GETs of kind's keys of shard 0 among ids.
func (g *kindGets) of(kind func(uint32, uint64) string, ids map[uint64]bool) (n int, which []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id := range ids {
		if c := g.gets[kind(0, id)]; c > 0 {
			n += c
			which = append(which, id)
		}
	}
	return n, which
}

// TestIndexObjects: end to end on both emulators. Every segment the owner
// ships gets an index object beside it, which verify finds usable; GC
// deletes the index objects with their segments, in a sweep and by key; a
// machine that restored lazily reads one execution's events by fetching
// the remote segments' index objects and then only the segments that hold
// that execution; an index object that does not describe its segment (here
// another segment's, put in its place) is refused and its segment fetched,
// and the reads stay right.
func TestIndexObjects(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) { indexObjects(t, be) })
	}
}

func indexObjects(t *testing.T, be backend) {
	v := newEnv(t, be, false)
	ctx := ctxT(t)
	l := open(t, bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true})
	common := execsOf(0, 1, 3)
	needle := execsOf(0, 1, 4)[3]
	var want []localseg.Record
	add := func(n int) {
		for range n {
			i := len(want)
			e := evictEvent(common, i)
			if i%400 == 150 || i%400 == 151 {
				e.ExecutionID = needle
			}
			res, err := l.Append(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
		}
		if _, err := l.Ship(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	add(1200)
	segs, idxs := objects(t, v.b, 0, blobtier.KindSegment), objects(t, v.b, 0, blobtier.KindIndex)
	if len(idxs) != len(segs) || len(segs) < 20 {
		t.Fatalf("%d segment objects, %d index objects", len(segs), len(idxs))
	}
	for i := range segs {
		if idxs[i].Parsed.Segment != segs[i].Parsed.Segment {
			t.Fatalf("index object %s beside segment object %s", idxs[i].Key, segs[i].Key)
		}
	}

	// GC: the first pass sweeps, the next deletes by key; either way no
	// index object stays at or below the watermark, none above goes.
	for _, keep := range []int{len(segs) - 8, len(segs) - 12} {
		if _, err := l.GC(ctx, bucketlog.GCRequest{MaxRetainedSegments: keep}); err != nil {
			t.Fatal(err)
		}
		m, _, err := watermark.Read(ctx, v.b, 0)
		if err != nil || m.Segment == 0 {
			t.Fatalf("watermark %+v, %v", m, err)
		}
		segs, idxs = objects(t, v.b, 0, blobtier.KindSegment), objects(t, v.b, 0, blobtier.KindIndex)
		if len(idxs) != len(segs) || idxs[0].Parsed.Segment != m.Segment+1 {
			t.Fatalf("after GC through segment %d: %d segment objects, %d index objects from %s", m.Segment, len(segs), len(idxs), idxs[0].Key)
		}
		add(200)
	}
	first := want[0].Seq
	if m, _, err := watermark.Read(ctx, v.b, 0); err == nil {
		first = m.Seq + 1
	}
	want = want[first-want[0].Seq:]
	closeLog(t, l)

	rep, err := bucketlog.Verify(ctx, "", v.b, bucketlog.VerifyOptions{Shards: []uint32{0}})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v, %+v", err, rep.Problems)
	}
	ir := rep.Shards[0].IndexReport
	if ir.Objects != len(objects(t, v.b, 0, blobtier.KindSegment)) || ir.Usable != ir.Objects || len(ir.Unusable) != 0 || ir.Orphans != 0 {
		t.Fatalf("verify's index report: %+v", ir)
	}

	// Another segment's index object in place of one (a damaged copy
	// never verifies: blobtier refuses it on every read).
	segs = objects(t, v.b, 0, blobtier.KindSegment)
	victim, other := segs[1].Parsed.Segment, segs[2].Parsed.Segment
	body, _, err := v.b.Get(ctx, blobtier.IndexKey(0, other))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.b.Delete(ctx, blobtier.IndexKey(0, victim)); err != nil {
		t.Fatal(err)
	}
	if err := v.b.PutIfAbsent(ctx, blobtier.IndexKey(0, victim), body, 0); err != nil {
		t.Fatal(err)
	}
	if rep, err := bucketlog.Verify(ctx, "", v.b, bucketlog.VerifyOptions{Shards: []uint32{0}}); err != nil || !rep.OK() ||
		len(rep.Shards[0].Unusable) != 1 || !strings.Contains(rep.Shards[0].Unusable[0], blobtier.IndexKey(0, victim)) {
		t.Fatalf("verify with a foreign index object: %v, problems %+v, %+v", err, rep.Problems, rep.Shards[0].IndexReport)
	}

	// A lazily restored reader.
	g := &kindGets{Bucket: v.b, gets: map[string]int{}}
	dir := t.TempDir()
	r, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: g, Dir: dir, LazyBytes: 4 * evictSegMax})
	if err != nil || r.Lazy == nil || r.Lazy.FullBecause != "" {
		t.Fatalf("restore --lazy: %v, %+v", err, r.Lazy)
	}
	remote := map[uint64]bool{}
	for id := r.Lazy.RemoteFirstSegment; id <= r.Lazy.RemoteLastSegment; id++ {
		remote[id] = true
	}
	if !remote[victim] {
		t.Fatalf("segment %d is not among the remote ones %d..%d", victim, r.Lazy.RemoteFirstSegment, r.Lazy.RemoteLastSegment)
	}
	reader := open(t, bucketlog.Options{Dir: dir, Bucket: g, ReadOnly: true, RemoteCacheBytes: 64 << 10})
	defer closeLog(t, reader)
	segsBefore, _ := g.of(blobtier.SegmentKey, remote)
	res, err := reader.ReadExecution(ctx, needle, 0, len(want))
	if err != nil {
		t.Fatal(err)
	}
	var w []localseg.Record
	holding := map[uint64]bool{}
	for _, rec := range want {
		if rec.ExecutionID == needle {
			w = append(w, rec)
		}
	}
	sameRecords(t, "the needle's per-execution read", res.Page.Records, w)
	st := reader.Store().RemoteStats()
	for _, rec := range w {
		if id, ok := segmentOf(t, reader.Store(), rec.Seq); ok && remote[id] {
			holding[id] = true
		}
	}
	segsRead, which := g.of(blobtier.SegmentKey, remote)
	idxRead, _ := g.of(blobtier.IndexKey, remote)
	t.Logf("%s: a per-execution read over %d remote segments read %d index objects (%d used, %d refused) and fetched %d segments %v; %d hold the execution",
		be.name, len(remote), idxRead, st.IndexUsed, st.IndexRefused, segsRead-segsBefore, which, len(holding))
	if idxRead != len(remote) || st.IndexUsed != int64(len(remote)-1) || st.IndexRefused != 1 {
		t.Fatalf("%d index objects read, %d used, %d refused; want %d, %d, 1", idxRead, st.IndexUsed, st.IndexRefused, len(remote), len(remote)-1)
	}
	for _, id := range which {
		if !holding[id] && id != victim {
			t.Fatalf("segment %d holds no event of the execution and was fetched (index objects: %d used)", id, st.IndexUsed)
		}
	}
	if segsRead-segsBefore > len(holding)+1 {
		t.Fatalf("%d segment fetches for %d segments holding the execution and the refused one", segsRead-segsBefore, len(holding))
	}
	// Everything reads back byte for byte through the index objects.
	p, err := reader.Scan(ctx, 0, len(want)+1)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "scan", p.Records, want)
}

// segmentOf finds the segment holding seq, by the store's snapshot.
func segmentOf(t *testing.T, s *localseg.Store, seq uint64) (uint64, bool) {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range snap.Segments {
		if seg.Events > 0 && seg.FirstSeq <= seq && seq <= seg.LastSeq {
			return seg.ID, true
		}
	}
	return 0, false
}
