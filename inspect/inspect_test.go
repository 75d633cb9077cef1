package inspect_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/bucketlog/bucketlog/inspect"
	"github.com/bucketlog/bucketlog/localseg"
)

type mapRemote map[uint64][]byte

func (m mapRemote) FetchSegment(_ context.Context, id uint64) ([]byte, uint64, error) {
	if b, ok := m[id]; ok {
		return b, xxhash.Sum64(b), nil
	}
	return nil, 0, fmt.Errorf("no segment %d", id)
}

// An evicted segment is listed as remote, not as a problem.
func TestInspectEvictedSegments(t *testing.T) {
	dir := t.TempDir()
	remote := mapRemote{}
	st, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 1024, NoPreallocate: true, Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if _, err := st.Append(localseg.Event{ExecutionID: "1", TransactionID: fmt.Sprint(i), Payload: fmt.Sprintf("%080d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := st.Snapshot()
	for _, seg := range snap.Segments[:len(snap.Segments)-1] {
		b, err := st.ReadSegment(seg.ID)
		if err != nil {
			t.Fatal(err)
		}
		remote[seg.ID] = b
	}
	res, err := st.Evict(1, func(id uint64) bool { _, ok := remote[id]; return ok })
	if err != nil || len(res.Evicted) == 0 {
		t.Fatalf("evict: %v, %v", res.Evicted, err)
	}
	st.Close()
	rep, err := inspect.Dir(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	remoteN := 0
	for _, s := range rep.Segments {
		if s.Remote {
			remoteN++
		}
	}
	if len(rep.Problems) != 0 || remoteN != len(res.Evicted) {
		t.Fatalf("problems %v, %d segments remote, want %d", rep.Problems, remoteN, len(res.Evicted))
	}
}
