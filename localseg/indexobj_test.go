package localseg_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/bucketlog/bucketlog/localseg"
)

// indexRemote is fakeRemote with index objects (localseg.IndexSource).
type indexRemote struct {
	*fakeRemote
	mu       sync.Mutex
	idx      map[uint64][]byte
	idxReads int
	// inFlight and maxInFlight count the fetches running at once.
	inFlight, maxInFlight int
}

func (r *indexRemote) FetchIndex(_ context.Context, id uint64) ([]byte, error) {
	r.mu.Lock()
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.mu.Unlock()
	time.Sleep(100 * time.Microsecond) // a round trip: the read-ahead overlaps them
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	r.idxReads++
	b, ok := r.idx[id]
	if !ok {
		return nil, fmt.Errorf("no index object for segment %d", id)
	}
	return append([]byte(nil), b...), nil
}

// rareFixture is a lazily imported store (importFixtureWith, all but the 3
// newest segments in the bucket only) whose execution "rare" has events
// only at sequences 200–203; every other event is one of "a", "b", "c".
// The index objects of the imported segments are built by the store that
// wrote them (Store.SegmentIndexObject, as the uploader does).
func rareFixture(t *testing.T) (*evictFixture, *indexRemote, []localseg.EvictedSegment) {
	t.Helper()
	f, dst, imp := importFixtureWith(t, 3, func(f *evictFixture, s *localseg.Store) {
		for i := range 600 {
			exec := string(rune('a' + i%3))
			if i >= 199 && i < 203 {
				exec = "rare"
			}
			ev := localseg.Event{ExecutionID: exec, TransactionID: fmt.Sprint("t", i), Payload: strings.Repeat(fmt.Sprint(i), 1+i%40)}
			if _, err := s.Append(ev); err != nil {
				t.Fatal(err)
			}
			f.want = append(f.want, ev)
		}
	})
	src, err := localseg.Open(f.dir, f.options())
	if err != nil {
		t.Fatal(err)
	}
	r := &indexRemote{fakeRemote: f.remote, idx: map[uint64][]byte{}}
	for i := range imp {
		data := f.remote.objs[imp[i].ID]
		if r.idx[imp[i].ID], err = src.SegmentIndexObject(imp[i].ID, data); err != nil {
			t.Fatal(err)
		}
		imp[i].First = 0 // not known to a lazy hydrate
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := localseg.ImportEvicted(localseg.OSFS{}, dst, imp); err != nil {
		t.Fatal(err)
	}
	// As a lazy hydrate leaves it: the open replays nothing.
	if err := localseg.ImportCheckpoint(localseg.OSFS{}, dst, map[string]uint64{"reader": 100}); err != nil {
		t.Fatal(err)
	}
	f.dir = dst
	return f, r, imp
}

// holding returns the imported segments holding an event of exec.
func holding(t *testing.T, f *evictFixture, imp []localseg.EvictedSegment, exec string) map[uint64]bool {
	t.Helper()
	out := map[uint64]bool{}
	for _, e := range imp {
		p, err := localseg.VerifySegment(e.ID, f.remote.objs[e.ID], 0)
		if err != nil {
			t.Fatal(err)
		}
		for seq := p.FirstSeq; p.Events > 0 && seq <= p.LastSeq; seq++ {
			if f.want[seq-1].ExecutionID == exec {
				out[e.ID] = true
			}
		}
	}
	return out
}

// TestIndexObjectsLocateWithoutTheSegments: a per-execution read of a
// store that never held its older segments fetches their index objects
// (small) instead of every segment, and then only the segments that hold
// the execution's events; every event reads back byte for byte, and a
// reopened store fetches no index object again (they became index files).
// Its control: without index objects the same read fetches every
// imported segment.
func TestIndexObjectsLocateWithoutTheSegments(t *testing.T) {
	for _, withIndex := range []bool{true, false} {
		t.Run(fmt.Sprintf("index objects %v", withIndex), func(t *testing.T) {
			f, r, imp := rareFixture(t)
			if !withIndex {
				clear(r.idx)
			}
			o := f.options()
			o.Remote, o.TransactionWindow = r, 10 // the open reads only local segments
			s, err := localseg.Open(f.dir, o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			p, err := s.ReadExecution("rare", 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Records) != 4 || p.Records[0].Seq != 200 {
				t.Fatalf("read of execution rare: %+v", p.Records)
			}
			for _, rec := range p.Records {
				f.same(t, "rare", rec)
			}
			want := holding(t, f, imp, "rare")
			n, ids := fetchedTotal(f.remote)
			st := s.RemoteStats()
			t.Logf("index objects %v: %d of %d imported segments fetched %v, %d index objects read (at most %d at once), %d used", withIndex, n, len(imp), ids, r.idxReads, r.maxInFlight, st.IndexUsed)
			if !withIndex {
				if len(ids) != len(imp) || st.IndexUsed != 0 {
					t.Fatalf("without index objects: %d segments fetched, %d index objects used; want all %d, 0", len(ids), st.IndexUsed, len(imp))
				}
				return
			}
			// The read-ahead runs the fetches of the one the build asks for
			// and the indexFetchConcurrency (8) after it, and one more
			// while the consumed one's fetch returns: at most 10 at once,
			// whatever the number of segments.
			if r.maxInFlight > 10 || r.maxInFlight < 2 {
				t.Fatalf("%d index objects fetched at once, want 2..10", r.maxInFlight)
			}
			if n != len(want) || st.IndexUsed != int64(len(imp)) || st.IndexRefused != 0 {
				t.Fatalf("%d segments fetched %v (want the %d holding the execution: %v), %d index objects used of %d, %d refused",
					n, ids, len(want), want, st.IndexUsed, len(imp), st.IndexRefused)
			}
			for _, id := range ids {
				if !want[id] {
					t.Fatalf("segment %d holds no event of the execution and was fetched", id)
				}
			}
			f.check(t, s, 0)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			f.remote.mu.Lock()
			clear(f.remote.fetched)
			f.remote.mu.Unlock()
			r.idxReads = 0
			if s, err = localseg.Open(f.dir, o); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReadExecution("rare", 0, 10); err != nil {
				t.Fatal(err)
			}
			if n, _ := fetchedTotal(f.remote); n != len(want) || r.idxReads != 0 {
				t.Fatalf("after a reopen: %d segments and %d index objects fetched; want the %d holding the execution and none", n, r.idxReads, len(want))
			}
		})
	}
}

// patchIndex rewrites a field of an index object (the layout of
// docs/FORMAT.md §3.6) and seals it again with a valid trailing digest,
// so it decodes and only the trust rule can refuse it.
func patchIndex(b []byte, off int, v uint64) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(b[off:], v)
	binary.LittleEndian.PutUint64(b[len(b)-8:], xxhash.Sum64(b[:len(b)-8]))
	return b
}

// TestIndexObjectsThatDoNotDescribeTheSegmentAreIgnored: an index object
// that is damaged, belongs to another segment, records another digest or
// length, or another first event than the record knows, is refused
// (counted) and the segment is fetched instead; the reads are right.
func TestIndexObjectsThatDoNotDescribeTheSegmentAreIgnored(t *testing.T) {
	cases := map[string]func(id uint64, r *indexRemote, imp []localseg.EvictedSegment) []byte{
		"truncated": func(id uint64, r *indexRemote, _ []localseg.EvictedSegment) []byte {
			return r.idx[id][:len(r.idx[id])/2]
		},
		"another segment's": func(id uint64, r *indexRemote, imp []localseg.EvictedSegment) []byte {
			for _, e := range imp {
				if e.ID != id {
					return r.idx[e.ID]
				}
			}
			return nil
		},
		"another digest": func(id uint64, r *indexRemote, _ []localseg.EvictedSegment) []byte {
			return patchIndex(r.idx[id], 24, binary.LittleEndian.Uint64(r.idx[id][24:])^1)
		},
		"another length": func(id uint64, r *indexRemote, _ []localseg.EvictedSegment) []byte {
			return patchIndex(r.idx[id], 16, binary.LittleEndian.Uint64(r.idx[id][16:])+1)
		},
		"another first event": func(id uint64, r *indexRemote, _ []localseg.EvictedSegment) []byte {
			return patchIndex(r.idx[id], 32, binary.LittleEndian.Uint64(r.idx[id][32:])+1)
		},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			f, r, imp := rareFixture(t)
			if name == "another first event" {
				// The record knows the first events (an owner that
				// evicted its own segments, or a resolved lazy one).
				for i := range imp {
					imp[i].First = firstOf(t, f, imp[i].ID)
				}
				if err := os.Remove(filepath.Join(f.dir, "evicted.json")); err != nil {
					t.Fatal(err)
				}
				if err := localseg.ImportEvicted(localseg.OSFS{}, f.dir, imp); err != nil {
					t.Fatal(err)
				}
			}
			target := imp[1].ID
			r.idx[target] = bad(target, r, imp)
			o := f.options()
			o.Remote, o.TransactionWindow = r, 10
			s, err := localseg.Open(f.dir, o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f.check(t, s, 0)
			st := s.RemoteStats()
			if st.IndexRefused != 1 || st.IndexUsed != int64(len(imp)-1) {
				t.Fatalf("%d index objects refused, %d used; want 1, %d", st.IndexRefused, st.IndexUsed, len(imp)-1)
			}
			if f.remote.fetched[target] == 0 {
				t.Fatalf("segment %d, whose index object was refused, was never fetched", target)
			}
		})
	}
}

// firstOf is segment id's first event in the fake bucket (0: none).
func firstOf(t *testing.T, f *evictFixture, id uint64) uint64 {
	t.Helper()
	p, err := localseg.VerifySegment(id, f.remote.objs[id], 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Events == 0 {
		return 0
	}
	return p.FirstSeq
}

// TestOwnerOpenResolvesFirstsFromIndexObjects: an owner's open of a lazily
// hydrated store that does not know its remote segments' first events
// learns them from the index objects, fetching no segment, and then reads
// every event back right.
func TestOwnerOpenResolvesFirstsFromIndexObjects(t *testing.T) {
	f, r, imp := rareFixture(t)
	o := f.options()
	o.Remote, o.TransactionWindow, o.ResolveFirsts = r, 10, true
	s, err := localseg.Open(f.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, ids := fetchedTotal(f.remote); n != 0 || r.idxReads != len(imp) {
		t.Fatalf("the owner's open fetched %d segments %v and %d index objects; want none and %d", n, ids, r.idxReads, len(imp))
	}
	for _, e := range imp {
		seg := segmentInfo(t, s, e.ID)
		if want := firstOf(t, f, e.ID); seg.FirstSeq != want && !(want == 0 && seg.Events == 0) {
			t.Fatalf("segment %d: first event %d after the open, want %d", e.ID, seg.FirstSeq, want)
		}
	}
	f.check(t, s, 0)
}

// segmentInfo is segment id in s's snapshot.
func segmentInfo(t *testing.T, s *localseg.Store, id uint64) localseg.SegmentInfo {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range snap.Segments {
		if seg.ID == id {
			return seg
		}
	}
	t.Fatalf("no segment %d", id)
	return localseg.SegmentInfo{}
}
