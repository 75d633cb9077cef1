package reclaim

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// journal records the requests of a fake bucket and the calls of a fake
// store in one order, so a test can check the order of a pass's steps.
type journal struct {
	mu  sync.Mutex
	ops []string
}

func (j *journal) add(format string, args ...any) {
	if j == nil {
		return
	}
	j.mu.Lock()
	j.ops = append(j.ops, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.ops)
}

// index returns the position of the first op with the prefix, or -1.
func (j *journal) index(prefix string) int {
	for i, op := range j.list() {
		if strings.HasPrefix(op, prefix) {
			return i
		}
	}
	return -1
}

// fakeBucket is an in-memory bucket with compare-and-swap (every write gets
// a new generation), a flat key space listed in key order, and deletes that
// can be made to fail per key. It stands in for a CAS-capable bucket where
// a test needs exact control; the emulator tests run the real thing.
type fakeBucket struct {
	mu      sync.Mutex
	objs    map[string][]byte
	gens    map[string]int
	gen     int
	noCAS   bool
	failDel map[string]bool
	j       *journal
}

var _ Bucket = (*fakeBucket)(nil)

func newFakeBucket(j *journal) *fakeBucket {
	return &fakeBucket{objs: map[string][]byte{}, gens: map[string]int{}, failDel: map[string]bool{}, j: j}
}

func (f *fakeBucket) put(key string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	f.objs[key] = slices.Clone(data)
	f.gens[key] = f.gen
}

func (f *fakeBucket) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.objs[key]
	return ok
}

func (f *fakeBucket) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.objs))
	for k := range f.objs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (f *fakeBucket) GetVersioned(_ context.Context, key string) ([]byte, blobtier.Version, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.j.add("get %s", key)
	d, ok := f.objs[key]
	if !ok {
		return nil, "", fmt.Errorf("get %s: %w", key, blobtier.ErrNotFound)
	}
	return slices.Clone(d), blobtier.Version(strconv.Itoa(f.gens[key])), nil
}

func (f *fakeBucket) CompareAndSwap(_ context.Context, key string, data []byte, expect blobtier.Version) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noCAS {
		return blobtier.ErrUnsupported
	}
	f.j.add("cas %s %s", key, data)
	cur := blobtier.Version("")
	if _, ok := f.objs[key]; ok {
		cur = blobtier.Version(strconv.Itoa(f.gens[key]))
	}
	if cur != expect {
		return fmt.Errorf("cas %s: %w", key, blobtier.ErrPrecondition)
	}
	f.gen++
	f.objs[key] = slices.Clone(data)
	f.gens[key] = f.gen
	return nil
}

func (f *fakeBucket) CanCAS() bool { return !f.noCAS }

func (f *fakeBucket) List(_ context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	prefix := blobtier.ListPrefix(shard, kind)
	f.j.add("list %s", prefix)
	var infos []blobtier.ObjectInfo
	for _, k := range f.keys() {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		f.mu.Lock()
		info := blobtier.ObjectInfo{Key: k, Size: int64(len(f.objs[k]))}
		f.mu.Unlock()
		info.Parsed, info.ParseErr = blobtier.ParseKey(k)
		infos = append(infos, info)
	}
	return func(yield func(blobtier.ObjectInfo, error) bool) {
		for _, info := range infos {
			if !yield(info, nil) {
				return
			}
		}
	}
}

var errRefused = errors.New("fake: delete refused")

func (f *fakeBucket) Delete(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDel[key] {
		f.j.add("delete-failed %s", key)
		return fmt.Errorf("delete %s: %w", key, errRefused)
	}
	f.j.add("delete %s", key)
	delete(f.objs, key)
	delete(f.gens, key)
	return nil
}

// fakeStore is a store reduced to what reclaim uses: a snapshot whose
// segments Reclaim removes from the front.
type fakeStore struct {
	mu       sync.Mutex
	snap     localseg.Snapshot
	readOnly bool
	j        *journal
}

var _ Store = (*fakeStore)(nil)

func (s *fakeStore) Snapshot() (localseg.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snap
	snap.Segments = slices.Clone(s.snap.Segments)
	return snap, nil
}

func (s *fakeStore) Reclaim(through uint64) (localseg.ReclaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readOnly {
		return localseg.ReclaimResult{}, localseg.ErrReadOnly
	}
	res := localseg.ReclaimResult{ThroughSegment: s.snap.ReclaimedSeg, ThroughSeq: s.snap.ReclaimedSeq}
	if through == s.snap.ReclaimedSeg {
		return res, nil // localseg: the current target again is a no-op
	}
	s.j.add("reclaim %d", through)
	for len(s.snap.Segments) > 0 && s.snap.Segments[0].ID <= through {
		sg := s.snap.Segments[0]
		if !sg.Sealed {
			return res, fmt.Errorf("fake: segment %d is active: %w", sg.ID, localseg.ErrInvalidState)
		}
		s.snap.Segments = s.snap.Segments[1:]
		s.snap.ReclaimedSeg, s.snap.ReclaimedSeq = sg.ID, sg.LastSeq
		res.Removed = append(res.Removed, sg.ID)
		res.Bytes += sg.Size
	}
	res.ThroughSegment, res.ThroughSeq = s.snap.ReclaimedSeg, s.snap.ReclaimedSeq
	return res, nil
}
