package reclaim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// bucketWith uploads the given segments of snap (as the uploader would)
// and one tail object per segment covering its events, plus one for the
// active segment's events.
func bucketWith(j *journal, shard uint32, snap localseg.Snapshot, uploaded ...uint64) *fakeBucket {
	b := newFakeBucket(j)
	for _, s := range snap.Segments {
		if slices.Contains(uploaded, s.ID) {
			b.put(blobtier.SegmentKey(shard, s.ID), make([]byte, s.Size))
		}
		if s.Events > 0 {
			b.put(blobtier.TailKey(shard, s.FirstSeq, s.LastSeq), make([]byte, 10*s.Events))
		}
	}
	return b
}

func inBucket(b *fakeBucket, shard uint32) func(uint64) bool {
	return func(id uint64) bool { return b.has(blobtier.SegmentKey(shard, id)) }
}

func segKeys(b *fakeBucket, shard uint32) []uint64 {
	var out []uint64
	for info := range b.List(context.Background(), shard, blobtier.KindSegment) {
		if info.ParseErr == nil {
			out = append(out, info.Parsed.Segment)
		}
	}
	return out
}

func tailLasts(b *fakeBucket, shard uint32) []uint64 {
	var out []uint64
	for info := range b.List(context.Background(), shard, blobtier.KindTail) {
		if info.ParseErr == nil {
			out = append(out, info.Parsed.LastSeq)
		}
	}
	return out
}

func TestSharedCommitsTheWatermarkBeforeAnyDelete(t *testing.T) {
	ctx := context.Background()
	j := &journal{}
	st := &fakeStore{snap: synth(0, 6, 10, 3, map[string]uint64{"c": 53}), j: j}
	b := bucketWith(j, 5, st.snap, 1, 2, 3, 4, 5)
	j.ops = nil

	res, err := Shared(ctx, st, b, 5, Owner, Policy{Enabled: true}, inBucket(b, 5))
	if err != nil {
		t.Fatal(err)
	}
	want := watermark.Mark{Seq: 40, Segment: 4, V: 1}
	if res.Watermark != want || !res.Advanced {
		t.Fatalf("watermark %+v advanced %v, want %+v", res.Watermark, res.Advanced, want)
	}
	if !slices.Equal(res.Local.Removed, ids(1, 4)) || st.snap.ReclaimedSeg != 4 {
		t.Fatalf("local reclaim %+v", res.Local)
	}
	if got := segKeys(b, 5); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("segment objects left: %v", got)
	}
	if got := tailLasts(b, 5); !slices.Equal(got, []uint64{50, 53}) {
		t.Fatalf("tail objects left (last seqs): %v", got)
	}
	if res.Deleted.Segments != 4 || res.Deleted.Tails != 4 || res.Deleted.Failed != 0 {
		t.Fatalf("deleted %+v", res.Deleted)
	}
	cas, local, del := j.index("cas "), j.index("reclaim "), j.index("delete ")
	if !(cas >= 0 && cas < local && local < del) {
		t.Fatalf("order of steps: %q", j.list())
	}
	// The stored mark is what the pass reports.
	if m, _, _ := watermark.Read(ctx, b, 5); m != want {
		t.Fatalf("stored mark %+v", m)
	}
}

func TestSharedRefusals(t *testing.T) {
	ctx := context.Background()
	snap := synth(0, 6, 10, 3, map[string]uint64{"c": 53})
	cases := []struct {
		name    string
		role    Role
		noCAS   bool
		durable bool
		want    error
	}{
		{"non-owner", NonOwner, false, true, ErrNotOwner},
		{"no compare-and-swap", Owner, true, true, blobtier.ErrUnsupported},
		{"no durable function", Owner, false, false, ErrNoDurable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &journal{}
			st := &fakeStore{snap: snap, j: j}
			b := bucketWith(nil, 0, snap, 1, 2, 3, 4, 5)
			b.j, b.noCAS = j, tc.noCAS
			var durable func(uint64) bool
			if tc.durable {
				durable = inBucket(b, 0)
			}
			_, err := Shared(ctx, st, b, 0, tc.role, Policy{Enabled: true}, durable)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if ops := j.list(); len(ops) != 0 {
				t.Fatalf("a refused pass made requests: %q", ops)
			}
		})
	}
	if !errors.Is(ErrSharedUnsupported, blobtier.ErrUnsupported) {
		t.Fatal("ErrSharedUnsupported does not match blobtier.ErrUnsupported")
	}
}

func TestSharedAdoptsTheBucketsWatermark(t *testing.T) {
	ctx := context.Background()
	j := &journal{}
	st := &fakeStore{snap: synth(0, 6, 10, 3, nil), j: j}
	b := bucketWith(j, 0, st.snap, 1, 2, 3, 4, 5)
	b.put(blobtier.WatermarkKey(0), watermark.Mark{Seq: 20, Segment: 2, V: 4}.Encode())
	// GC is off here: adopting a committed watermark is coherence, not
	// policy, so it happens anyway, and so do the deletes it allows.
	res, err := Shared(ctx, st, b, 0, Owner, Policy{}, inBucket(b, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Adopted.Removed, ids(1, 2)) || res.Advanced || !res.Plan.Empty() {
		t.Fatalf("adopted %+v advanced %v plan %+v", res.Adopted, res.Advanced, res.Plan)
	}
	if st.snap.ReclaimedSeg != 2 || st.snap.ReclaimedSeq != 20 {
		t.Fatalf("local base %d/%d", st.snap.ReclaimedSeg, st.snap.ReclaimedSeq)
	}
	if got := segKeys(b, 0); !slices.Equal(got, ids(3, 5)) {
		t.Fatalf("segment objects left: %v", got)
	}
	if j.index("cas ") >= 0 {
		t.Fatalf("the mark was rewritten: %q", j.list())
	}
}

func TestSharedRefusesADivergedWatermark(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		mark watermark.Mark
	}{
		{"beyond the local store", watermark.Mark{Seq: 90, Segment: 9, V: 1}},
		{"the active segment", watermark.Mark{Seq: 53, Segment: 6, V: 1}},
		{"other end of segment", watermark.Mark{Seq: 25, Segment: 3, V: 1}},
		{"other end of the base", watermark.Mark{Seq: 25, Segment: 2, V: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &journal{}
			snap := synth(0, 6, 10, 3, map[string]uint64{"c": 53})
			if tc.name == "other end of the base" {
				snap = synth(2, 4, 10, 3, map[string]uint64{"c": 53})
			}
			st := &fakeStore{snap: snap, j: j}
			b := bucketWith(j, 0, snap, 1, 2, 3, 4, 5)
			b.put(blobtier.WatermarkKey(0), tc.mark.Encode())
			before := b.keys()
			_, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, inBucket(b, 0))
			if !errors.Is(err, ErrDiverged) {
				t.Fatalf("err = %v, want ErrDiverged", err)
			}
			if j.index("reclaim ") >= 0 || j.index("cas ") >= 0 || !slices.Equal(before, b.keys()) {
				t.Fatalf("a diverged pass changed something: %q", j.list())
			}
		})
	}
}

func TestSharedCommitsALocalBaseAboveTheWatermark(t *testing.T) {
	// A store reclaimed locally before it shipped: the bucket must learn
	// the base before readers look for what the owner no longer has.
	ctx := context.Background()
	st := &fakeStore{snap: synth(3, 3, 10, 3, nil)}
	b := bucketWith(nil, 0, st.snap, 4, 5)
	res, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, inBucket(b, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Advanced || res.Watermark != (watermark.Mark{Seq: 30, Segment: 3, V: 1}) {
		t.Fatalf("watermark %+v advanced %v", res.Watermark, res.Advanced)
	}
}

// TestSharedNeverDeletesPastASegmentNotInTheBucket is the safety case on
// the shared path: segments durable / not yet uploaded / durable. The pass
// may reclaim the first only; the middle segment's events stay in the
// bucket's tail objects, and the third segment's object stays too.
func TestSharedNeverDeletesPastASegmentNotInTheBucket(t *testing.T) { // §6.6
	ctx := context.Background()
	st := &fakeStore{snap: synth(0, 6, 10, 3, map[string]uint64{"c": 53})}
	b := bucketWith(nil, 0, st.snap, 1, 3, 4, 5) // segment 2 not uploaded
	res, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, inBucket(b, 0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Watermark.Segment != 1 || res.Watermark.Seq != 10 || st.snap.ReclaimedSeg != 1 {
		t.Fatalf("watermark %+v, local base %d", res.Watermark, st.snap.ReclaimedSeg)
	}
	if got := segKeys(b, 0); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("segment objects left: %v", got)
	}
	if got := tailLasts(b, 0); !slices.Contains(got, 20) {
		t.Fatalf("the tail object holding segment 2's events was deleted: %v", got)
	}
	if res.Plan.Stop != StopNotDurable || res.Plan.StopSegment != 2 {
		t.Fatalf("plan stop %s at %d", res.Plan.Stop, res.Plan.StopSegment)
	}
}

// TestSharedCrashAfterEachStep stops a pass after each step, as a crash
// would, and runs the next pass: it converges to the state of an
// uninterrupted pass, the objects above the watermark are untouched at
// every point (what a non-owner reads), and nothing reclaimed comes back.
// The same sweep over a real localseg store, crashing inside the local
// reclaim too, is in crash_test.go.
func TestSharedCrashAfterEachStep(t *testing.T) {
	ctx := context.Background()
	setup := func() (*fakeStore, *fakeBucket) {
		st := &fakeStore{snap: synth(0, 8, 10, 3, map[string]uint64{"c": 73})}
		return st, bucketWith(nil, 0, st.snap, 1, 2, 3, 4, 5, 6, 7)
	}
	refStore, refBucket := setup()
	if _, err := Shared(ctx, refStore, refBucket, 0, Owner, Policy{Enabled: true}, inBucket(refBucket, 0)); err != nil {
		t.Fatal(err)
	}
	errCrash := errors.New("crash")
	for _, stop := range []Step{StepAdopt, StepCommit, StepLocal, StepDelete} {
		t.Run(string(stop), func(t *testing.T) {
			st, b := setup()
			_, err := shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, inBucket(b, 0), SharedOptions{}, func(s Step) error {
				if s == stop {
					return errCrash
				}
				return nil
			})
			if !errors.Is(err, errCrash) {
				t.Fatalf("err = %v", err)
			}
			m, _, _ := watermark.Read(ctx, b, 0)
			// A non-owner skips everything ≤ the mark; above it, nothing
			// was touched, whichever step the crash hit.
			_, initial := setup()
			if got, want := above(b, m), above(initial, m); !slices.Equal(got, want) {
				t.Fatalf("objects above the mark %+v: %v, want %v", m, got, want)
			}
			// The owner's next pass realigns: adopt, then delete orphans.
			res, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, inBucket(b, 0))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(b.keys(), refBucket.keys()) {
				t.Fatalf("after the next pass the bucket holds %v, want %v", b.keys(), refBucket.keys())
			}
			if st.snap.ReclaimedSeg != refStore.snap.ReclaimedSeg || len(st.snap.Segments) != len(refStore.snap.Segments) {
				t.Fatalf("after the next pass the store is at %d, want %d", st.snap.ReclaimedSeg, refStore.snap.ReclaimedSeg)
			}
			if res.Watermark.Segment != 6 || res.Watermark.Seq != 60 {
				t.Fatalf("watermark %+v", res.Watermark)
			}
			// A third pass has nothing to do.
			again, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, inBucket(b, 0))
			if err != nil || again.Advanced || !again.Plan.Empty() || !reflect.DeepEqual(again.Deleted, DeleteResult{}) {
				t.Fatalf("third pass %+v, %v", again, err)
			}
		})
	}
}

// above lists the keys of shard 0 that a reader honouring m would read.
func above(b *fakeBucket, m watermark.Mark) []string {
	var out []string
	for _, k := range b.keys() {
		key, err := blobtier.ParseKey(k)
		if err != nil {
			continue
		}
		switch {
		case key.Kind == blobtier.KindSegment && key.Segment > m.Segment,
			key.Kind == blobtier.KindTail && key.LastSeq > m.Seq:
			out = append(out, k)
		}
	}
	return out
}

func TestDeleteThroughIsIdempotentAndRetriesFailures(t *testing.T) { // §6.1
	ctx := context.Background()
	snap := synth(0, 6, 10, 3, nil)
	b := bucketWith(nil, 0, snap, 1, 2, 3, 4, 5)
	b.failDel[blobtier.SegmentKey(0, 2)] = true
	mark := watermark.Mark{Seq: 30, Segment: 3, V: 1}

	res, err := DeleteThrough(ctx, b, 0, mark)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 2 || res.Tails != 3 || res.Failed != 1 || len(res.Errors) != 1 {
		t.Fatalf("first pass %+v", res)
	}
	if got := segKeys(b, 0); !slices.Equal(got, []uint64{2, 4, 5}) {
		t.Fatalf("left %v", got)
	}
	delete(b.failDel, blobtier.SegmentKey(0, 2))
	res, err = DeleteThrough(ctx, b, 0, mark)
	if err != nil || res.Segments != 1 || res.Failed != 0 {
		t.Fatalf("second pass %+v, %v", res, err)
	}
	res, err = DeleteThrough(ctx, b, 0, mark)
	if err != nil || !reflect.DeepEqual(res, DeleteResult{}) {
		t.Fatalf("third pass %+v, %v", res, err)
	}
	// The zero mark deletes nothing and makes no request.
	j := &journal{}
	b.j = j
	if res, err := DeleteThrough(ctx, b, 0, watermark.Mark{}); err != nil || !reflect.DeepEqual(res, DeleteResult{}) || len(j.list()) != 0 {
		t.Fatalf("zero mark: %+v, %v, %q", res, err, j.list())
	}
}

func TestDeleteThroughKeepsWhatItDoesNotUnderstand(t *testing.T) {
	ctx := context.Background()
	b := newFakeBucket(nil)
	odd := []string{
		"noetl.ehdb.seg.00000000.XYZ",
		"noetl.ehdb.seg.00000000.0000000000000001.old",
		"noetl.ehdb.tail.00000000.0000000000000009.0000000000000001",
		"noetl.ehdb.tail.00000000.notes.txt",
	}
	for _, k := range odd {
		b.put(k, []byte("x"))
	}
	b.put(blobtier.SegmentKey(1, 1), []byte("other shard"))
	res, err := DeleteThrough(ctx, b, 0, watermark.Mark{Seq: 1 << 62, Segment: 1 << 62, V: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Unparsed != len(odd) || res.Segments != 0 || res.Tails != 0 {
		t.Fatalf("result %+v", res)
	}
	if len(b.keys()) != len(odd)+1 {
		t.Fatalf("keys left %v", b.keys())
	}
}

func ExampleMakePlan() {
	snap := localseg.Snapshot{
		Tip: 23, Consumers: map[string]uint64{"projector": 16},
		Segments: []localseg.SegmentInfo{
			{ID: 1, Sealed: true, FirstSeq: 1, LastSeq: 8, Events: 8},
			{ID: 2, Sealed: true, FirstSeq: 9, LastSeq: 16, Events: 8},
			{ID: 3, Sealed: true, FirstSeq: 17, LastSeq: 20, Events: 4},
			{ID: 4, FirstSeq: 21, LastSeq: 23, Events: 3},
		},
	}
	p := MakePlan(snap, Policy{Enabled: true}, nil)
	fmt.Println(p.Remove, p.Reason)
	// Output: [1 2] consumer "projector" at 16 holds the boundary; reclaim segments 1..2 through sequence 16; the min-retained floor of 2 keeps segment 3 and later
}

// TestSharedByKeyDeletesWhatThePassCovers: with ByKey the pass deletes the
// newly covered segment objects by their keys, without listing segments,
// and the same objects go as with a sweep; an orphan left below the old
// watermark is not swept by key (the caller sweeps after a start or a
// failure), and the sweep then removes it.
func TestSharedByKeyDeletesWhatThePassCovers(t *testing.T) {
	ctx := context.Background()
	j := &journal{}
	st := &fakeStore{snap: synth(0, 6, 10, 3, map[string]uint64{"c": 53}), j: j}
	b := bucketWith(j, 5, st.snap, 1, 2, 3, 4, 5)
	// An orphan below a watermark committed earlier: segment 1 is covered
	// by a mark at segment 1, but its delete never happened.
	if _, err := watermark.Advance(ctx, b, 5, 10, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reclaim(1); err != nil {
		t.Fatal(err)
	}
	j.ops = nil
	res, err := SharedWith(ctx, st, b, 5, Owner, Policy{Enabled: true}, inBucket(b, 5), SharedOptions{ByKey: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Watermark.Segment != 4 || res.Deleted.Segments != 3 {
		t.Fatalf("by key: watermark %+v deleted %+v", res.Watermark, res.Deleted)
	}
	for _, op := range j.list() {
		if strings.HasPrefix(op, "list ") && strings.Contains(op, "seg") {
			t.Fatalf("a by-key pass listed the segments: %q", j.list())
		}
	}
	if got := segKeys(b, 5); !slices.Equal(got, []uint64{1, 5}) {
		t.Fatalf("segment objects left after the by-key pass: %v (want the orphan 1 and the retained 5)", got)
	}
	// The sweep removes the orphan.
	if _, err := Shared(ctx, st, b, 5, Owner, Policy{Enabled: true}, inBucket(b, 5)); err != nil {
		t.Fatal(err)
	}
	if got := segKeys(b, 5); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("segment objects left after the sweep: %v", got)
	}
}
