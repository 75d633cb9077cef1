package localseg_test

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// TestLazyOwnerOpenResolvesFirsts: a writable open with ResolveFirsts of a
// store whose older segments a lazy hydrate imported with the first event
// not known reports every segment's event range as the store that wrote
// them did (an owner's start and GC read them from the snapshot), records
// the firsts in evicted.json (a reopen fetches nothing), and appends and
// reads every event back. With the bucket failing, the open is refused
// (ErrRemoteRead) and no byte of the directory changes.
func TestLazyOwnerOpenResolvesFirsts(t *testing.T) {
	f, dst, imp := importFixture(t, 3)
	src, err := localseg.Open(f.dir, localseg.Options{ReadOnly: true, Remote: f.remote})
	if err != nil {
		t.Fatal(err)
	}
	want, err := src.Snapshot()
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
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
	o := f.options()
	o.ResolveFirsts = true
	o.TransactionWindow = 10 // the window is filled from the newest segments only

	// Refused while the bucket fails: nothing changes.
	before := dirBytes(t, dst)
	f.remote.fail = errors.New("503 slow down")
	if s, err := localseg.Open(dst, o); !errors.Is(err, localseg.ErrRemoteRead) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("an owner's open with the bucket failing: %v, want ErrRemoteRead", err)
	}
	f.remote.fail = nil
	after := dirBytes(t, dst)
	delete(after, "LOCK") // the writer's lock, taken before the record is read
	if !sameFiles(before, after) {
		t.Fatal("a refused owner's open changed the directory")
	}

	s, err := localseg.Open(dst, o)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, sg := range want.Segments[:len(imp)] {
		got := snap.Segments[i]
		if got.ID != sg.ID || got.Events != sg.Events || (sg.Events > 0 && (got.FirstSeq != sg.FirstSeq || got.LastSeq != sg.LastSeq)) {
			t.Fatalf("segment %d after the owner's open: %+v, the writer had %+v", sg.ID, got, sg)
		}
	}
	f.append(t, s, 5)
	f.check(t, s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.remote.mu.Lock()
	clear(f.remote.fetched)
	f.remote.mu.Unlock()
	s, err = localseg.Open(dst, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, ids := fetchedTotal(f.remote); n != 0 {
		t.Fatalf("a second owner's open fetched %d segments %v: the firsts were not recorded", n, ids)
	}
}

// TestLazyOwnerOpenRefusesFirstsOutOfOrder is a RED control: when the
// bucket's verified copies of two remote segments give first events that
// do not ascend with their ids (the record and the bucket disagree on
// which segment is which), the owner's open is refused as corrupt and
// evicted.json keeps the unknown firsts.
func TestLazyOwnerOpenRefusesFirstsOutOfOrder(t *testing.T) {
	f, dst, imp := importFixture(t, 3)
	a, b := imp[1], imp[2]
	f.remote.mu.Lock()
	f.remote.objs[a.ID], f.remote.objs[b.ID] = f.remote.objs[b.ID], f.remote.objs[a.ID]
	f.remote.mu.Unlock()
	imp[1].Size, imp[1].XXH64 = b.Size, b.XXH64
	imp[2].Size, imp[2].XXH64 = a.Size, a.XXH64
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
	o := f.options()
	o.ResolveFirsts, o.TransactionWindow = true, 10
	before := dirBytes(t, dst)
	s, err := localseg.Open(dst, o)
	if !errors.Is(err, localseg.ErrCorrupt) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("an owner's open over swapped remote segments: %v, want ErrCorrupt", err)
	}
	after := dirBytes(t, dst)
	delete(after, "LOCK")
	if !sameFiles(before, after) {
		t.Fatal("a refused owner's open changed the directory")
	}
}
