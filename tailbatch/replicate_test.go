package tailbatch_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// One pass ships every durable event of the active segment in one tail
// object, and the bucket then holds each of them (with its payload).
func TestReplicateShipsTheUnsealedTail(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newMemBucket(t)
	tip := appendN(t, s, 21)

	r := tailbatch.New(0, 0, tailbatch.Options{})
	res, err := r.Replicate(ctx, s, b)
	if err != nil {
		t.Fatalf("replicate: %v", err)
	}
	if res.Batches != 1 || res.Records != 21 || res.ShippedThrough != tip {
		t.Fatalf("result = %+v, want 1 batch of 21 records through %d", res, tip)
	}
	got := bucketEvents(t, ctx, b, 0)
	if m := missing(got, tip); len(m) != 0 || len(got) != int(tip) {
		t.Fatalf("bucket holds %d events, missing %v", len(got), m)
	}
	for seq, payload := range got {
		rec, err := s.Get(seq)
		if err != nil {
			t.Fatalf("local get %d: %v", seq, err)
		}
		if rec.Payload != payload {
			t.Fatalf("sequence %d: bucket payload %q, local %q", seq, payload, rec.Payload)
		}
	}
	st := r.Stats()
	if st.Batches != 1 || st.Records != 21 || st.Bytes == 0 || st.Failed != 0 || st.ShippedThrough != tip {
		t.Fatalf("stats = %+v", st)
	}
	if keys := keysOf(t, ctx, b, 0, blobtier.KindTail); !slices.Equal(keys, []string{blobtier.TailKey(0, 1, tip)}) {
		t.Fatalf("tail keys = %v", keys)
	}
}

// CHECKLIST §4.3: a tail object is never mistaken for a segment. Tail
// objects live in their own key space: they are never listed as segments,
// and their keys parse as tail keys only.
func TestTailObjectIsNeverASegment(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{SegmentMaxBytes: 4 << 10})
	b := newMemBucket(t)
	r := tailbatch.New(0, 0, tailbatch.Options{})
	for range 5 {
		appendN(t, s, 17)
		if _, err := r.Replicate(ctx, s, b); err != nil {
			t.Fatalf("replicate: %v", err)
		}
	}
	sealed := uploadSealed(t, ctx, s, b, 0)
	if len(sealed) == 0 {
		t.Fatal("the workload sealed no segment; make it larger")
	}

	tails := keysOf(t, ctx, b, 0, blobtier.KindTail)
	segs := keysOf(t, ctx, b, 0, blobtier.KindSegment)
	if len(tails) < 5 || len(segs) != len(sealed) {
		t.Fatalf("%d tail keys, %d segment keys (sealed %d)", len(tails), len(segs), len(sealed))
	}
	for _, k := range tails {
		if !strings.HasPrefix(k, "noetl.ehdb.tail.") || slices.Contains(segs, k) {
			t.Fatalf("tail key %q is not in the tail key space", k)
		}
		pk, err := blobtier.ParseKey(k)
		if err != nil || pk.Kind != blobtier.KindTail {
			t.Fatalf("ParseKey(%q) = %+v, %v: want a tail key", k, pk, err)
		}
	}
	for _, k := range segs {
		if pk, err := blobtier.ParseKey(k); err != nil || pk.Kind != blobtier.KindSegment || len(k) != 40 {
			t.Fatalf("segment key %q parses as %+v, %v", k, pk, err)
		}
	}
}

// CHECKLIST §4.5: with replication off the replicator does nothing: it never
// asks the store for anything and never touches the bucket.
func TestDisabledReplicatorDoesNothing(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	src := &countingSource{Source: s}
	appendN(t, s, 10)

	r := tailbatch.New(0, 0, tailbatch.Options{Disabled: true})
	batches, err := r.Prepare(src)
	if err != nil || len(batches) != 0 {
		t.Fatalf("prepare = %v, %v; want nothing", batches, err)
	}
	for range 10 {
		res, err := r.Replicate(ctx, src, b)
		if err != nil || !reflect.DeepEqual(res, tailbatch.Result{}) {
			t.Fatalf("replicate = %+v, %v; want a zero result", res, err)
		}
	}
	if n := b.total(); n != 0 {
		t.Fatalf("a disabled replicator made %d bucket requests: %v", n, b.callsCopy())
	}
	if src.extents+src.ranges != 0 {
		t.Fatalf("a disabled replicator read the store: %d extents, %d ranges", src.extents, src.ranges)
	}
	if keys := keysOf(t, ctx, b, 0, blobtier.KindTail); len(keys) != 0 {
		t.Fatalf("tail objects written: %v", keys)
	}
	if r.ShippedThrough() != 0 || r.Stats() != (tailbatch.Stats{}) {
		t.Fatalf("stats moved: %+v", r.Stats())
	}
}

// CHECKLIST §4.6: a second pass with no new events writes nothing; one new
// event writes exactly one new tail object holding it, and the cursor object.
func TestSecondPassWritesNothingOneEventOneObject(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	r := tailbatch.New(0, 0, tailbatch.Options{})
	tip := appendN(t, s, 5)
	if _, err := r.Replicate(ctx, s, b); err != nil {
		t.Fatalf("first pass: %v", err)
	}

	before := b.total()
	res, err := r.Replicate(ctx, s, b)
	if err != nil || res.Prepared != 0 || res.CursorWritten {
		t.Fatalf("second pass = %+v, %v", res, err)
	}
	if n := b.total() - before; n != 0 {
		t.Fatalf("a pass with nothing new made %d requests", n)
	}

	appendN(t, s, 1)
	putsBefore, writesBefore := len(b.putKeys()), b.count(opPut)+b.count(opCAS)
	res, err = r.Replicate(ctx, s, b)
	if err != nil {
		t.Fatalf("third pass: %v", err)
	}
	newPuts := b.putKeys()[putsBefore:]
	if want := []string{blobtier.TailKey(0, tip+1, tip+1)}; !slices.Equal(newPuts, want) {
		t.Fatalf("one new event put %v, want %v", newPuts, want)
	}
	if n := b.count(opPut) + b.count(opCAS) - writesBefore; n != 1 || !res.CursorWritten {
		t.Fatalf("cursor object writes = %d (written %v), want 1", n, res.CursorWritten)
	}
	c, _, err := tailbatch.ReadCursor(ctx, b, 0)
	if err != nil || c.ShippedThrough != tip+1 {
		t.Fatalf("cursor object = %+v, %v; want shipped_through %d", c, err, tip+1)
	}
}

// An idle shard issues no request at all: 100 passes over a store with
// nothing new make zero bucket requests.
func TestIdleShardMakesNoRequests(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	r := tailbatch.New(0, 0, tailbatch.Options{})

	// A store with no event at all, then one whose events all shipped.
	for phase := range 2 {
		before := b.total()
		for range 100 {
			res, err := r.Replicate(ctx, s, b)
			if err != nil || res.Prepared != 0 {
				t.Fatalf("phase %d: idle pass = %+v, %v", phase, res, err)
			}
		}
		if n := b.total() - before; n != 0 {
			t.Fatalf("phase %d: 100 idle passes made %d requests: %v", phase, n, b.callsCopy())
		}
		appendN(t, s, 3)
		if _, err := r.Replicate(ctx, s, b); err != nil {
			t.Fatalf("shipping pass: %v", err)
		}
	}
}

// CHECKLIST §4.7: a refusing bucket. Appends still succeed, the failure is
// counted, the cursor does not move, and the next pass retries exactly the
// same events under the same key.
func TestRefusingBucketRetriesTheSameEvents(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	r := tailbatch.New(0, 0, tailbatch.Options{})
	tip := appendN(t, s, 4)
	if _, err := r.Replicate(ctx, s, b); err != nil {
		t.Fatalf("first pass: %v", err)
	}

	tip2 := appendN(t, s, 3)
	b.setBefore(refuseAll)
	var refusedKeys []string
	for pass := range 3 {
		res, err := r.Replicate(ctx, s, b)
		if !errors.Is(err, errRefused) {
			t.Fatalf("pass %d against a refusing bucket: err = %v", pass, err)
		}
		var ue *tailbatch.UploadError
		if !errors.As(err, &ue) {
			t.Fatalf("pass %d: err %v is not an *UploadError", pass, err)
		}
		refusedKeys = append(refusedKeys, ue.Key)
		if res.Failed != 1 || res.Batches != 0 || r.ShippedThrough() != tip {
			t.Fatalf("pass %d: result %+v, cursor %d; want a failure and cursor %d", pass, res, r.ShippedThrough(), tip)
		}
		// Appends carry on while the bucket refuses.
		if _, err := s.Append(event(int(s.Tip())+1, "during outage")); err != nil {
			t.Fatalf("append during the outage: %v", err)
		}
	}
	st := r.Stats()
	if st.Failed != 3 || st.Batches != 1 || st.LastError == "" {
		t.Fatalf("stats = %+v; want 3 failures counted", st)
	}
	// Each retry names the same first event (more events arrived meanwhile,
	// so the batch grew, but it starts where the cursor stands).
	for i, k := range refusedKeys {
		pk, err := blobtier.ParseKey(k)
		if err != nil || pk.FirstSeq != tip+1 || pk.LastSeq != tip2+uint64(i) {
			t.Fatalf("retry %d shipped %s (%+v, %v); want events %d..%d", i, k, pk, err, tip+1, tip2+uint64(i))
		}
	}
	if got := bucketEvents(t, ctx, b.inner, 0); len(got) != int(tip) {
		t.Fatalf("the refusing bucket received events: holds %d, want %d", len(got), tip)
	}

	b.setBefore(nil)
	res, err := r.Replicate(ctx, s, b)
	if err != nil || res.Batches != 1 || res.ShippedThrough != s.Tip() {
		t.Fatalf("pass after recovery = %+v, %v", res, err)
	}
	if m := missing(bucketEvents(t, ctx, b, 0), s.Tip()); len(m) != 0 {
		t.Fatalf("after recovery the bucket misses %v", m)
	}
}

// Fail leaves the cursor: the next Prepare produces the very same batch
// (same key, same bytes) when nothing new arrived.
func TestFailReshipsTheSameKey(t *testing.T) {
	s := openStore(t, localseg.Options{})
	appendN(t, s, 9)
	r := tailbatch.New(0, 0, tailbatch.Options{})
	first, err := r.Prepare(s)
	if err != nil || len(first) != 1 {
		t.Fatalf("prepare = %v, %v", first, err)
	}
	r.Fail(first[0], errRefused)
	again, err := r.Prepare(s)
	if err != nil || !slices.Equal(first, again) {
		t.Fatalf("after Fail, prepare = %v, %v; want %v again", again, err, first)
	}
	if r.Stats().Failed != 1 || r.ShippedThrough() != 0 {
		t.Fatalf("stats = %+v", r.Stats())
	}
}

// A put that landed but whose acknowledgement was lost fails the pass; the
// retry finds the identical object under the key and counts it as success.
func TestLostAckRetryIsSuccess(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	tip := appendN(t, s, 6)
	r := tailbatch.New(0, 0, tailbatch.Options{})

	b.setAfter(func(op, key string) error {
		if op == opPutIfAbsent {
			return errRefused
		}
		return nil
	})
	if _, err := r.Replicate(ctx, s, b); !errors.Is(err, errRefused) {
		t.Fatalf("lost ack: err = %v", err)
	}
	if keys := keysOf(t, ctx, b, 0, blobtier.KindTail); len(keys) != 1 || r.ShippedThrough() != 0 {
		t.Fatalf("after a lost ack: keys %v, cursor %d", keys, r.ShippedThrough())
	}
	b.setAfter(nil)
	res, err := r.Replicate(ctx, s, b)
	if err != nil || res.ShippedThrough != tip || r.Err() != nil {
		t.Fatalf("retry = %+v, %v (latched %v)", res, err, r.Err())
	}
	if keys := keysOf(t, ctx, b, 0, blobtier.KindTail); len(keys) != 1 {
		t.Fatalf("retry wrote a second object: %v", keys)
	}
}

// A different object already under a tail key is a second writer: the
// upload error matches blobtier.ErrConflict, it is counted, and the
// replicator stops (every later pass refuses at once, without requests).
func TestConflictStopsShipping(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	tip := appendN(t, s, 3)

	// Another writer's bytes for the same sequences.
	other := openStore(t, localseg.Options{})
	for i := range 3 {
		if _, err := other.Append(event(i+1, "other writer")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tailbatch.New(0, 0, tailbatch.Options{}).Replicate(ctx, other, b); err != nil {
		t.Fatalf("other writer: %v", err)
	}

	r := tailbatch.New(0, 0, tailbatch.Options{})
	_, err := r.Replicate(ctx, s, b)
	if !errors.Is(err, blobtier.ErrConflict) {
		t.Fatalf("err = %v; want a blobtier.ErrConflict", err)
	}
	var ue *tailbatch.UploadError
	if !errors.As(err, &ue) || ue.Key != blobtier.TailKey(0, 1, tip) {
		t.Fatalf("err %v does not name the key %s", err, blobtier.TailKey(0, 1, tip))
	}
	st := r.Stats()
	if st.Conflicts != 1 || st.Failed != 1 || r.ShippedThrough() != 0 {
		t.Fatalf("stats = %+v", st)
	}
	appendN(t, s, 2)
	before := b.total()
	for range 3 {
		_, err := r.Replicate(ctx, s, b)
		if !errors.Is(err, tailbatch.ErrStopped) || !errors.Is(err, blobtier.ErrConflict) {
			t.Fatalf("pass after a conflict: err = %v; want ErrStopped and ErrConflict", err)
		}
	}
	if _, err := r.Prepare(s); !errors.Is(err, tailbatch.ErrStopped) {
		t.Fatalf("prepare after a conflict: %v", err)
	}
	if n := b.total() - before; n != 0 {
		t.Fatalf("a stopped replicator made %d requests", n)
	}
}

// CHECKLIST §4.9: Prepare touches no bucket. After a pass that did use the
// bucket (so a replicator that kept it around could reach it), the bucket
// starts refusing every call: Prepare still succeeds and makes no request;
// the upload of what it prepared then fails against that same bucket.
func TestPrepareTouchesNoBucket(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	r := tailbatch.New(0, 0, tailbatch.Options{})
	shipped := appendN(t, s, 3)
	if _, err := r.Replicate(ctx, s, b); err != nil {
		t.Fatalf("first pass: %v", err)
	}

	b.setBefore(refuseAll)
	tip := appendN(t, s, 8)
	before := b.total()
	batches, err := r.Prepare(s)
	if err != nil || len(batches) != 1 || batches[0].FirstSeq != shipped+1 || batches[0].LastSeq != tip {
		t.Fatalf("prepare while the bucket refuses = %v, %v", batches, err)
	}
	if n := b.total() - before; n != 0 {
		t.Fatalf("prepare made %d bucket requests", n)
	}
	err = tailbatch.Upload(ctx, b, s, batches[0])
	if !errors.Is(err, errRefused) {
		t.Fatalf("upload against the refusing bucket: %v", err)
	}
	r.Fail(batches[0], err)
	if r.ShippedThrough() != shipped || r.Stats().Failed != 1 {
		t.Fatalf("after the failed upload: cursor %d stats %+v", r.ShippedThrough(), r.Stats())
	}
}

// Commit only moves forward and only contiguously: a batch past a gap is
// ignored and reported; a batch the cursor already covers is a no-op; an
// overlapping batch that extends the cursor is accepted.
func TestCommitRequiresContiguity(t *testing.T) {
	s := openStore(t, localseg.Options{SegmentMaxBytes: 1 << 10})
	appendN(t, s, 30)
	r := tailbatch.New(0, 0, tailbatch.Options{})
	batches, err := r.Prepare(s)
	if err != nil || len(batches) < 3 {
		t.Fatalf("prepare = %d batches, %v; want several segments", len(batches), err)
	}
	a, bb, c := batches[0], batches[1], batches[2]

	// The second batch landed, the first did not: the cursor must stay.
	if err := r.Commit(bb); !errors.Is(err, tailbatch.ErrNotContiguous) {
		t.Fatalf("commit over a gap: %v", err)
	}
	if r.ShippedThrough() != 0 || r.Stats().NotContiguous != 1 || r.Stats().Batches != 0 {
		t.Fatalf("after a refused commit: cursor %d stats %+v", r.ShippedThrough(), r.Stats())
	}
	if err := r.Commit(a); err != nil || r.ShippedThrough() != a.LastSeq {
		t.Fatalf("commit of the first batch: %v, cursor %d", err, r.ShippedThrough())
	}
	if err := r.Commit(bb); err != nil || r.ShippedThrough() != bb.LastSeq {
		t.Fatalf("commit of the second batch: %v, cursor %d", err, r.ShippedThrough())
	}
	// Re-committing an older batch never moves the cursor back.
	if err := r.Commit(a); err != nil || r.ShippedThrough() != bb.LastSeq {
		t.Fatalf("re-commit of the first batch: %v, cursor %d", err, r.ShippedThrough())
	}
	// Advance (segments durable) past part of c; c still extends it.
	r.Advance(c.FirstSeq + 1)
	r.Advance(1) // never backward
	if err := r.Commit(c); err != nil || r.ShippedThrough() != c.LastSeq {
		t.Fatalf("commit of an overlapping batch: %v, cursor %d", err, r.ShippedThrough())
	}
	foreign := c
	foreign.Shard = 1
	if err := r.Commit(foreign); !errors.Is(err, tailbatch.ErrBadBatch) {
		t.Fatalf("commit of another shard's batch: %v", err)
	}
	if st := r.Stats(); st.Batches != 3 || st.NotContiguous != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// A pass stops at the first failed upload, so a later batch is never
// committed over the gap it would leave.
func TestPassStopsAtFirstFailure(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{SegmentMaxBytes: 1 << 10})
	b := newTestBucket(newMemBucket(t))
	appendN(t, s, 30)
	r := tailbatch.New(0, 0, tailbatch.Options{})
	batches, err := r.Prepare(s)
	if err != nil || len(batches) < 3 {
		t.Fatalf("prepare = %d batches, %v", len(batches), err)
	}
	refused := batches[1].Key
	b.setBefore(func(op, key string) error {
		if key == refused {
			return errRefused
		}
		return nil
	})
	res, err := r.Replicate(ctx, s, b)
	if !errors.Is(err, errRefused) || res.Batches != 1 || r.ShippedThrough() != batches[0].LastSeq {
		t.Fatalf("pass = %+v, %v, cursor %d; want the cursor at %d", res, err, r.ShippedThrough(), batches[0].LastSeq)
	}
	if got := b.putKeys(); !slices.Equal(got, []string{batches[0].Key, batches[1].Key}) {
		t.Fatalf("puts = %v; nothing after the failed batch may be tried", got)
	}
	c, _, err := tailbatch.ReadCursor(ctx, b, 0)
	if err != nil || c.ShippedThrough != batches[0].LastSeq {
		t.Fatalf("cursor object = %+v, %v; want shipped_through %d", c, err, batches[0].LastSeq)
	}
	b.setBefore(nil)
	if _, err := r.Replicate(ctx, s, b); err != nil || r.ShippedThrough() != s.Tip() {
		t.Fatalf("next pass: %v, cursor %d, tip %d", err, r.ShippedThrough(), s.Tip())
	}
}

// Batches never span two segments, follow each other without a gap, and
// stay within MaxBatchBytes; together they cover every durable event.
func TestBatchesStayInOneSegmentAndUnderTheCap(t *testing.T) {
	s := openStore(t, localseg.Options{SegmentMaxBytes: 8 << 10})
	tip := appendN(t, s, 200)
	const limit = 1 << 10
	r := tailbatch.New(5, 0, tailbatch.Options{MaxBatchBytes: limit, MaxBatchesPerPass: 1000})
	batches, err := r.Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	segSize := map[uint64]int64{}
	for _, seg := range snap.Segments {
		segSize[seg.ID] = seg.Size
	}
	next := uint64(1)
	segsSeen := map[uint64]bool{}
	for _, bt := range batches {
		if bt.FirstSeq != next || bt.LastSeq < bt.FirstSeq {
			t.Fatalf("batch %v starts at %d, want %d", bt, bt.FirstSeq, next)
		}
		if bt.Len() > limit {
			t.Fatalf("batch %v is %d bytes, above %d", bt, bt.Len(), limit)
		}
		if bt.End > segSize[bt.Segment] {
			t.Fatalf("batch %v runs past the end of segment %d (%d bytes)", bt, bt.Segment, segSize[bt.Segment])
		}
		if bt.Key != blobtier.TailKey(5, bt.FirstSeq, bt.LastSeq) || bt.Shard != 5 {
			t.Fatalf("batch %v has the wrong key", bt)
		}
		segsSeen[bt.Segment] = true
		next = bt.LastSeq + 1
	}
	if next != tip+1 || len(segsSeen) < 2 {
		t.Fatalf("batches cover through %d of %d across %d segments", next-1, tip, len(segsSeen))
	}
	// The per-pass cap holds the rest back for the next pass.
	r2 := tailbatch.New(5, 0, tailbatch.Options{MaxBatchBytes: limit, MaxBatchesPerPass: 3})
	capped, err := r2.Prepare(s)
	if err != nil || len(capped) != 3 || !slices.Equal(capped, batches[:3]) {
		t.Fatalf("capped prepare = %v, %v", capped, err)
	}
}

// With the default 8 MiB cap, a tail of more than 8 MiB in one segment is
// cut into two objects at an event boundary.
func TestDefaultCapSplitsAnOversizedTail(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 10 MiB")
	}
	ctx := context.Background()
	s := openStore(t, localseg.Options{SegmentMaxBytes: localseg.MaxSegmentBytes})
	b := newTestBucket(newMemBucket(t))
	pad := strings.Repeat("x", 16<<10)
	evs := make([]localseg.Event, 0, 64)
	for i := range 640 { // 640 × ~16 KiB ≈ 10 MiB
		evs = append(evs, event(i+1, pad))
		if len(evs) == cap(evs) {
			if _, _, err := s.AppendBatch(evs); err != nil {
				t.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	r := tailbatch.New(0, 0, tailbatch.Options{})
	res, err := r.Replicate(ctx, s, b)
	if err != nil || res.Batches != 2 || res.ShippedThrough != 640 {
		t.Fatalf("replicate = %+v, %v; want 2 batches through 640", res, err)
	}
	for info, err := range b.List(ctx, 0, blobtier.KindTail) {
		if err != nil {
			t.Fatal(err)
		}
		if info.Size > tailbatch.MaxBatchBytes {
			t.Fatalf("%s is %d bytes, above %d", info.Key, info.Size, tailbatch.MaxBatchBytes)
		}
	}
	if m := missing(bucketEvents(t, ctx, b, 0), 640); len(m) != 0 {
		t.Fatalf("missing %v", m)
	}
}

// corruptReader serves a byte range with one byte flipped, the way bit-rot
// on the local disk would.
type corruptReader struct{ src tailbatch.RangeReader }

func (c corruptReader) ReadRange(segment uint64, off, n int64) ([]byte, error) {
	data, err := c.src.ReadRange(segment, off, n)
	if err == nil && len(data) > 20 {
		data[len(data)/2] ^= 0x40
	}
	return data, err
}

// Upload checks the local bytes before the put: a corrupt range never
// reaches the bucket under a fresh digest. A batch whose key does not match
// its range is refused too.
func TestUploadRefusesBadLocalBytes(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	appendN(t, s, 5)
	r := tailbatch.New(0, 0, tailbatch.Options{})
	batches, err := r.Prepare(s)
	if err != nil || len(batches) != 1 {
		t.Fatalf("prepare: %v, %v", batches, err)
	}
	bt := batches[0]
	if err := tailbatch.Upload(ctx, b, corruptReader{s}, bt); !errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("upload of corrupt bytes: %v; want localseg.ErrCorrupt", err)
	}
	lying := bt
	lying.LastSeq--
	lying.Key = blobtier.TailKey(0, lying.FirstSeq, lying.LastSeq)
	if err := tailbatch.Upload(ctx, b, s, lying); !errors.Is(err, tailbatch.ErrBadBatch) {
		t.Fatalf("upload of a batch whose key names fewer events: %v", err)
	}
	wrongKey := bt
	wrongKey.Key = blobtier.TailKey(1, bt.FirstSeq, bt.LastSeq)
	if err := tailbatch.Upload(ctx, b, s, wrongKey); !errors.Is(err, tailbatch.ErrBadBatch) {
		t.Fatalf("upload under another shard's key: %v", err)
	}
	if n := b.count(opPutIfAbsent); n != 0 {
		t.Fatalf("%d puts reached the bucket", n)
	}
	if err := tailbatch.Upload(ctx, b, s, bt); err != nil {
		t.Fatalf("upload of the good batch: %v", err)
	}
}

// RED control at the tailbatch level (the recovery side lives in coldload):
// with tail replication off, the bucket holds the sealed segments only, and
// exactly the events of the unsealed segment are missing; with it on, every
// event is there.
func TestREDUnsealedEventsNeedTheTail(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "replication=off", true: "replication=on"}[on]
		t.Run(name, func(t *testing.T) {
			s := openStore(t, localseg.Options{SegmentMaxBytes: 4 << 10})
			b := newMemBucket(t)
			r := tailbatch.New(0, 0, tailbatch.Options{Disabled: !on})
			for range 4 {
				appendN(t, s, 20)
				if _, err := r.Replicate(ctx, s, b); err != nil {
					t.Fatal(err)
				}
			}
			segs := uploadSealed(t, ctx, s, b, 0)
			if len(segs) == 0 {
				t.Fatal("nothing sealed")
			}
			sealedThrough := segs[len(segs)-1].LastSeq
			tip := s.Tip()
			unsealed := tip - sealedThrough
			if unsealed == 0 {
				t.Fatal("the workload left no unsealed event")
			}
			m := missing(bucketEvents(t, ctx, b, 0), tip)
			if on {
				if len(m) != 0 {
					t.Fatalf("with replication on the bucket misses %v", m)
				}
				return
			}
			if uint64(len(m)) != unsealed || m[0] != sealedThrough+1 || m[len(m)-1] != tip {
				t.Fatalf("with replication off the bucket misses %d events (%v); want exactly the %d unsealed ones %d..%d",
					len(m), m, unsealed, sealedThrough+1, tip)
			}
		})
	}
}

// A cursor below the local reclaim base is refused by Prepare (it cannot
// name sequences the store no longer has) until Advance moves it to the
// base, after which shipping continues from there.
func TestCursorBelowTheReclaimBase(t *testing.T) {
	s := openStore(t, localseg.Options{SegmentMaxBytes: 2 << 10})
	appendN(t, s, 60)
	snap, err := s.Snapshot()
	if err != nil || len(snap.Segments) < 3 {
		t.Fatalf("snapshot: %d segments, %v", len(snap.Segments), err)
	}
	first := snap.Segments[0]
	if _, err := s.Reclaim(first.ID); err != nil {
		t.Fatal(err)
	}
	r := tailbatch.New(0, 0, tailbatch.Options{})
	if _, err := r.Prepare(s); !errors.Is(err, tailbatch.ErrBadExtent) {
		t.Fatalf("prepare below the base: %v", err)
	}
	r.Advance(first.LastSeq)
	batches, err := r.Prepare(s)
	if err != nil || len(batches) == 0 || batches[0].FirstSeq != first.LastSeq+1 {
		t.Fatalf("prepare after Advance: %v, %v", batches, err)
	}
}
