package reclaim

// Shared reclaim on a real localseg store and an emulated bucket
// (CHECKLIST §6).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
	"github.com/bucketlog/bucketlog/watermark"
)

// ship seals st and uploads, as the uploader and the tail replicator would
// have, a tail object with each segment's frames (shipped before the seal)
// and every sealed segment except those in skip (an upload that has not
// happened yet).
func ship(t testing.TB, b blobtier.Bucket, shard uint32, st *localseg.Store, skip ...uint64) {
	t.Helper()
	if failed := shipTolerant(t, b, shard, st, skip...); len(failed) > 0 {
		t.Fatalf("segment uploads failed: %v", failed)
	}
}

// shipTolerant is ship returning the ids of the segments whose upload the
// bucket refused.
func shipTolerant(t testing.TB, b blobtier.Bucket, shard uint32, st *localseg.Store, skip ...uint64) (failed []uint64) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, st)
	for _, s := range snap.Segments {
		if !s.Sealed {
			continue
		}
		data, err := st.ReadSegment(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.Events > 0 {
			if err := b.PutIfAbsent(ctx, blobtier.TailKey(shard, s.FirstSeq, s.LastSeq), data, 0); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Contains(skip, s.ID) {
			if err := b.PutIfAbsent(ctx, blobtier.SegmentKey(shard, s.ID), data, 0); err != nil {
				failed = append(failed, s.ID)
			}
		}
	}
	return failed
}

func durableFn(t testing.TB, b blobtier.Bucket, shard uint32, st *localseg.Store) func(uint64) bool {
	t.Helper()
	d, err := durableInBucket(context.Background(), b, shard, st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// coldPage is what a non-owner reads of shard: a cold load from the bucket
// alone, scanned from 0.
func coldPage(t testing.TB, b blobtier.Bucket, shard uint32) localseg.Page {
	t.Helper()
	st, cleanup, err := coldload.ReadOnly(context.Background(), b, shard, t.TempDir())
	if err != nil {
		t.Fatalf("cold load of shard %d: %v", shard, err)
	}
	defer cleanup()
	page, err := st.Scan(0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

func scanAll(t testing.TB, st *localseg.Store) localseg.Page {
	t.Helper()
	page, err := st.Scan(0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// wantPage checks a page holds exactly evs above reclaimedSeq.
func wantPage(t testing.TB, what string, page localseg.Page, evs []localseg.Event, reclaimedSeq uint64) {
	t.Helper()
	if page.Base != reclaimedSeq+1 || uint64(len(page.Records)) != uint64(len(evs))-reclaimedSeq {
		t.Fatalf("%s: base %d with %d records; want base %d with %d", what, page.Base, len(page.Records), reclaimedSeq+1, uint64(len(evs))-reclaimedSeq)
	}
	for i, r := range page.Records {
		ev := evs[reclaimedSeq+uint64(i)]
		if r.Seq != reclaimedSeq+uint64(i)+1 || r.Payload != ev.Payload || r.ExecutionID != ev.ExecutionID || r.TransactionID != ev.TransactionID {
			t.Fatalf("%s: record %d is %+v, want %+v", what, i, r, ev)
		}
	}
}

// bucketKeys lists every segment and tail key of shard.
func bucketKeys(t testing.TB, b blobtier.Bucket, shard uint32) []string {
	t.Helper()
	keys, err := shardKeys(context.Background(), b, shard)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// keysAbove filters keys to those a reader honouring m reads.
func keysAbove(keys []string, m watermark.Mark) []string {
	var out []string
	for _, k := range keys {
		key, err := blobtier.ParseKey(k)
		if err != nil || (key.Kind == blobtier.KindSegment && key.Segment > m.Segment) ||
			(key.Kind == blobtier.KindTail && key.LastSeq > m.Seq) {
			out = append(out, k)
		}
	}
	return out
}

func TestSharedOnARealStore(t *testing.T) {
	for _, be := range []struct {
		name string
		open func(testing.TB) blobtier.Bucket
	}{{"gofakes3", s3Bucket}, {"fake-gcs-server", gcsBucket}} {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			b := be.open(t)
			st, evs := filled(t, t.TempDir(), localseg.Options{}, 40, "c", 30)
			ship(t, b, 0, st)
			before := bucketKeys(t, b, 0)
			res, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, durableFn(t, b, 0, st))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Advanced || res.Watermark.Seq == 0 || res.Watermark.Seq > 30 || len(res.Local.Removed) == 0 {
				t.Fatalf("pass %+v", res)
			}
			snap := snapshot(t, st)
			if snap.ReclaimedSeq != res.Watermark.Seq || snap.ReclaimedSeg != res.Watermark.Segment {
				t.Fatalf("local base %d/%d, watermark %+v", snap.ReclaimedSeq, snap.ReclaimedSeg, res.Watermark)
			}
			if got, want := bucketKeys(t, b, 0), keysAbove(before, res.Watermark); !slices.Equal(got, want) {
				t.Fatalf("bucket after the pass:\n%v\nwant\n%v", got, want)
			}
			owner := scanAll(t, st)
			wantPage(t, "owner", owner, evs, res.Watermark.Seq)
			wantPage(t, "non-owner", coldPage(t, b, 0), evs, res.Watermark.Seq)

			again, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, durableFn(t, b, 0, st))
			if err != nil || again.Advanced || !again.Plan.Empty() || again.Deleted.Segments+again.Deleted.Tails != 0 {
				t.Fatalf("second pass %+v, %v", again, err)
			}
		})
	}
}

// TestSharedStopAfterEachStep: the process dies after each step of a pass
// (the step's effects are durable, nothing after it ran). At that moment a
// non-owner's cold load already shows exactly the events above the
// bucket's watermark; the restarted owner's next pass realigns, removes
// the orphans, and leaves owner and non-owner reading the same log.
func TestSharedStopAfterEachStep(t *testing.T) { // §6.1, §6.4
	ctx := context.Background()
	b := s3Bucket(t)
	errCrash := errors.New("process died")
	for i, stop := range []Step{StepAdopt, StepCommit, StepLocal, StepDelete} {
		t.Run(string(stop), func(t *testing.T) {
			shard := uint32(100 + i)
			dir := t.TempDir()
			st, evs := filled(t, dir, localseg.Options{}, 40, "c", 30)
			ship(t, b, shard, st)
			initial := bucketKeys(t, b, shard)
			planned := MakePlan(snapshot(t, st), Policy{Enabled: true}, durableFn(t, b, shard, st))
			_, err := shared(ctx, st, b, shard, Owner, Policy{Enabled: true}, durableFn(t, b, shard, st), SharedOptions{}, func(s Step) error {
				if s == stop {
					return errCrash
				}
				return nil
			})
			if !errors.Is(err, errCrash) {
				t.Fatalf("err = %v", err)
			}
			st.Close()

			m, _, err := watermark.Read(ctx, b, shard)
			if err != nil {
				t.Fatal(err)
			}
			// Nothing is committed before the commit step; from it on, the
			// planned mark is.
			wantMark := watermark.Mark{Seq: planned.ThroughSeq, Segment: planned.ThroughSegment, V: 1}
			if (stop == StepAdopt && m != watermark.Mark{}) || (stop != StepAdopt && m != wantMark) {
				t.Fatalf("after a stop at %s the mark is %+v (planned %+v)", stop, m, wantMark)
			}
			// The bucket never loses an object above the mark, and a
			// non-owner already reads exactly what is above it.
			if got, want := keysAbove(bucketKeys(t, b, shard), m), keysAbove(initial, m); !slices.Equal(got, want) {
				t.Fatalf("objects above %+v: %v, want %v", m, got, want)
			}
			wantPage(t, "non-owner after the stop", coldPage(t, b, shard), evs, m.Seq)

			// The owner restarts; its log is the old one or the reclaimed
			// one (over-serving until it realigns is benign).
			st, err = localseg.Open(dir, localseg.Options{SegmentMaxBytes: testSegBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			snap := snapshot(t, st)
			if stop == StepCommit && (snap.ReclaimedSeq != 0 || m.Seq == 0) {
				t.Fatalf("after a stop at the commit: local base %d, mark %+v", snap.ReclaimedSeq, m)
			}
			wantPage(t, "owner after restart", scanAll(t, st), evs, snap.ReclaimedSeq)

			res, err := Shared(ctx, st, b, shard, Owner, Policy{Enabled: true}, durableFn(t, b, shard, st))
			if err != nil {
				t.Fatal(err)
			}
			if stop == StepCommit && len(res.Adopted.Removed) == 0 {
				t.Fatal("the owner did not adopt the committed watermark")
			}
			if res.Watermark != wantMark {
				t.Fatalf("the next pass left the mark at %+v, want %+v", res.Watermark, wantMark)
			}
			m = res.Watermark
			snap = snapshot(t, st)
			if snap.ReclaimedSeq != m.Seq || snap.ReclaimedSeg != m.Segment {
				t.Fatalf("owner base %d/%d after realigning, mark %+v", snap.ReclaimedSeq, snap.ReclaimedSeg, m)
			}
			if got, want := bucketKeys(t, b, shard), keysAbove(initial, m); !slices.Equal(got, want) {
				t.Fatalf("orphans left: %v, want %v", got, want)
			}
			wantPage(t, "owner after realigning", scanAll(t, st), evs, m.Seq)
			wantPage(t, "non-owner after realigning", coldPage(t, b, shard), evs, m.Seq)
		})
	}
}

// TestSharedCrashSweepInsideTheLocalReclaim crashes the owner at every
// write-class file operation of a Shared pass (the local reclaim after the
// watermark commit) and checks the restarted owner realigns with the bucket.
func TestSharedCrashSweepInsideTheLocalReclaim(t *testing.T) { sweepShared(t, false) }

// TestSharedCrashSweepInsideTheAdopt: a pass committed the watermark and
// died; the restarted owner's next pass adopts it, and crashes at every
// write-class operation of that adopt.
func TestSharedCrashSweepInsideTheAdopt(t *testing.T) { sweepShared(t, true) } // §6.4

func sweepShared(t *testing.T, adopt bool) {
	ctx := context.Background()
	b := s3Bucket(t)
	pol := Policy{Enabled: true}
	finished, points := false, 0
	for k := 0; k < maxSweep && !finished; k++ {
		shard := uint32(1000 + k)
		if adopt {
			shard += 100000
		}
		m := newMachine(t)
		crash := faultfs.CrashAt(int64(k))
		toggle := faultfs.NewToggle(crash, false)
		opts := localseg.Options{SegmentMaxBytes: testSegBytes}
		wopts := opts
		wopts.FS = faultfs.Wrap(m, toggle)
		st, evs := filled(t, crashDir, wopts, 40, "c", 30)
		ship(t, b, shard, st)
		initial := bucketKeys(t, b, shard)
		durable := durableFn(t, b, shard, st)
		want := MakePlan(snapshot(t, st), pol, durable)
		if adopt {
			// The earlier pass: it dies right after its commit.
			errDied := errors.New("died after the commit")
			if _, err := shared(ctx, st, b, shard, Owner, pol, durable, SharedOptions{}, func(s Step) error {
				if s == StepCommit {
					return errDied
				}
				return nil
			}); !errors.Is(err, errDied) {
				t.Fatal(err)
			}
		}

		toggle.On()
		res, err := Shared(ctx, st, b, shard, Owner, pol, durable)
		op, crashed := crash.Crashed()
		if !crashed {
			if err != nil {
				t.Fatalf("k=%d: pass without a crash: %v", k, err)
			}
			if adopt && !slices.Equal(res.Adopted.Removed, want.Remove) {
				t.Fatalf("the pass adopted %v, want %v", res.Adopted.Removed, want.Remove)
			}
			finished = true
		} else {
			points++
		}
		st.Close()
		mark, _, err := watermark.Read(ctx, b, shard)
		if err != nil {
			t.Fatal(err)
		}
		if mark.Seq != want.ThroughSeq || mark.Segment != want.ThroughSegment {
			t.Fatalf("k=%d (%s): mark %+v, plan through %d/%d", k, op, mark, want.ThroughSeq, want.ThroughSegment)
		}
		wantPage(t, fmt.Sprintf("k=%d non-owner", k), coldPage(t, b, shard), evs, mark.Seq)

		c := m.CrashClone(faultfs.CrashOptions{Torn: k%2 == 1, Seed: uint64(k)})
		opts.FS = c
		st, err = localseg.Open(crashDir, opts)
		if err != nil {
			t.Fatalf("k=%d (%s): reopen: %v", k, op, err)
		}
		snap := snapshot(t, st)
		if snap.ReclaimedSeq != 0 && snap.ReclaimedSeq != mark.Seq {
			t.Fatalf("k=%d (%s): local base %d, want 0 or %d", k, op, snap.ReclaimedSeq, mark.Seq)
		}
		res, err = Shared(ctx, st, b, shard, Owner, pol, durableFn(t, b, shard, st))
		if err != nil {
			t.Fatalf("k=%d (%s): next pass: %v", k, op, err)
		}
		if res.Watermark != mark || snapshot(t, st).ReclaimedSeq != mark.Seq {
			t.Fatalf("k=%d (%s): next pass mark %+v, local base %d", k, op, res.Watermark, snapshot(t, st).ReclaimedSeq)
		}
		if got, want := bucketKeys(t, b, shard), keysAbove(initial, mark); !slices.Equal(got, want) {
			t.Fatalf("k=%d (%s): bucket %v, want %v", k, op, got, want)
		}
		wantPage(t, fmt.Sprintf("k=%d owner", k), scanAll(t, st), evs, mark.Seq)
		st.Close()
	}
	if !finished {
		t.Fatalf("the pass did not finish within %d crash points", maxSweep)
	}
	t.Logf("crashed at each of %d write-class operations, then ran to the end", points)
}

func TestSharedNonOwnerIsRefused(t *testing.T) { // §6.3
	ctx := context.Background()
	b := s3Bucket(t)
	st, _ := filled(t, t.TempDir(), localseg.Options{}, 40, "c", 30)
	ship(t, b, 0, st)
	before := bucketKeys(t, b, 0)

	// A non-owner's view of the shard: a read-only cold load.
	ro, cleanup, err := coldload.ReadOnly(ctx, b, 0, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	_, err = Shared(ctx, ro, b, 0, NonOwner, Policy{Enabled: true, MaxRetainedSegments: 1}, func(uint64) bool { return true })
	if !errors.Is(err, ErrNotOwner) {
		t.Fatalf("non-owner shared reclaim: %v, want ErrNotOwner", err)
	}
	// Claiming ownership of a read-only view does not help: the store
	// cannot follow a watermark, so nothing is asked of the bucket.
	_, err = Shared(ctx, ro, b, 0, Owner, Policy{Enabled: true, MaxRetainedSegments: 1}, func(uint64) bool { return true })
	if !errors.Is(err, localseg.ErrReadOnly) {
		t.Fatalf("shared reclaim of a read-only view: %v, want ErrReadOnly", err)
	}
	// The non-owner's store also refuses a local reclaim.
	if _, _, err := Pass(ro, Policy{Enabled: true, MaxRetainedSegments: 1}, nil); !errors.Is(err, localseg.ErrReadOnly) {
		t.Fatalf("local reclaim of a read-only view: %v, want ErrReadOnly", err)
	}
	if m, v, err := watermark.Read(ctx, b, 0); err != nil || m != (watermark.Mark{}) || v != "" {
		t.Fatalf("the watermark was written: %+v %q %v", m, v, err)
	}
	if got := bucketKeys(t, b, 0); !slices.Equal(got, before) {
		t.Fatalf("the bucket changed: %v → %v", before, got)
	}
}

func TestSharedRefusedOnMemblob(t *testing.T) {
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer b.Close()
	st, _ := filled(t, t.TempDir(), localseg.Options{}, 40, "c", 30)
	ship(t, b, 0, st)
	before := bucketKeys(t, b, 0)
	_, err := Shared(context.Background(), st, b, 0, Owner, Policy{Enabled: true}, durableFn(t, b, 0, st))
	if !errors.Is(err, ErrSharedUnsupported) || !errors.Is(err, blobtier.ErrUnsupported) {
		t.Fatalf("shared GC on memblob: %v", err)
	}
	if snapshot(t, st).ReclaimedSeq != 0 || !slices.Equal(bucketKeys(t, b, 0), before) {
		t.Fatal("a refused pass changed something")
	}
}

// TestTailObjectReclaimedOnceASegmentCoversIt: tail objects shipped while
// the segment was active become superseded once the sealed segment is
// durable in the bucket; cleanup deletes them, keeps the ones beyond, and a
// cold load from the bucket alone still returns every event.
func TestTailObjectReclaimedOnceASegmentCoversIt(t *testing.T) { // §6.5
	ctx := context.Background()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer b.Close()
	st, err := localseg.Open(t.TempDir(), localseg.Options{SegmentMaxBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := testEvents(30)
	shipped := uint64(0)
	tick := func() { // one tail replication tick
		for {
			ext, ok, err := st.TailExtent(shipped, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			data, err := st.ReadRange(ext.Segment, ext.Start, ext.End-ext.Start)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PutIfAbsent(ctx, blobtier.TailKey(0, ext.FirstSeq, ext.LastSeq), data, 0); err != nil {
				t.Fatal(err)
			}
			shipped = ext.LastSeq
		}
	}
	for i, ev := range evs {
		if _, err := st.Append(ev); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 {
			tick()
		}
	}
	tick()
	tails := func() int { return len(tailLastsOf(t, b, 0)) }
	nTails := tails()
	// Upload the sealed segments (the active one is not sealed).
	snap := snapshot(t, st)
	for _, s := range snap.Segments {
		if s.Sealed {
			data, err := st.ReadSegment(s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PutIfAbsent(ctx, blobtier.SegmentKey(0, s.ID), data, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	seq, seg := watermark.Contiguous(snap.Segments, durableFn(t, b, 0, st))
	if seg == 0 || seq >= snap.Tip {
		t.Fatalf("contiguous watermark %d/%d with tip %d: the test needs sealed and unsealed events", seq, seg, snap.Tip)
	}
	res, err := CleanupTail(ctx, b, 0, seq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reclaimed == 0 || res.Retained == 0 || res.Reclaimed+res.Retained != nTails || res.Bytes == 0 {
		t.Fatalf("cleanup %+v of %d tail objects", res, nTails)
	}
	for _, last := range tailLastsOf(t, b, 0) {
		if last <= seq {
			t.Fatalf("a superseded tail object (last %d ≤ %d) survived", last, seq)
		}
	}
	// A cold load from the bucket alone still returns every event.
	dir := filepath.Join(t.TempDir(), "restore")
	if _, err := coldload.Hydrate(ctx, b, 0, dir, coldload.Options{}); err != nil {
		t.Fatal(err)
	}
	restored, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	wantPage(t, "restore after cleanup", scanAll(t, restored), evs, 0)
}

func tailLastsOf(t testing.TB, b blobtier.Bucket, shard uint32) []uint64 {
	t.Helper()
	var out []uint64
	for info, err := range b.List(context.Background(), shard, blobtier.KindTail) {
		if err != nil {
			t.Fatal(err)
		}
		if info.ParseErr == nil {
			out = append(out, info.Parsed.LastSeq)
		}
	}
	return out
}

// TestSafetyCaseOnARealStore: segments durable / not yet uploaded /
// durable / …, with the tail objects of every segment in the bucket. The
// contiguous watermark stops after the first segment; tail cleanup keeps
// every tail object above it, so a restore from the bucket alone still has
// the middle segment's events (from their tail object, the only off-box
// copy); and a shared reclaim never deletes past the first segment.
func TestSafetyCaseOnARealStore(t *testing.T) { // §6.6
	ctx := context.Background()
	// The bucket refuses the upload of segment 2 (and only that).
	fb := faultbucket.New(s3Blob(t), 1)
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: blobtier.SegmentKey(0, 2)})
	b := wrapBucket(t, fb.Bucket())
	st, evs := filled(t, t.TempDir(), localseg.Options{}, 40, "c", 40)
	if failed := shipTolerant(t, b, 0, st); !slices.Equal(failed, []uint64{2}) {
		t.Fatalf("refused uploads %v, want [2]", failed)
	}
	durable := durableFn(t, b, 0, st)
	snap := snapshot(t, st)
	if !durable(1) || durable(2) || !durable(3) {
		t.Fatal("the setup is not durable / local / durable")
	}
	seq, seg := watermark.Contiguous(snap.Segments, durable)
	if seg != 1 || seq != snap.Segments[0].LastSeq {
		t.Fatalf("Contiguous = (%d, %d), want (%d, 1)", seq, seg, snap.Segments[0].LastSeq)
	}
	if _, err := CleanupTail(ctx, b, 0, seq); err != nil {
		t.Fatal(err)
	}
	for _, last := range tailLastsOf(t, b, 0) {
		if last <= seq {
			t.Fatalf("tail object ending at %d survived a cleanup through %d", last, seq)
		}
	}
	if !slices.Contains(tailLastsOf(t, b, 0), snap.Segments[1].LastSeq) {
		t.Fatal("NOTHING covering the middle segment may be deleted while it is local-only")
	}

	res, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true, MinRetainedSegments: 1}, durable)
	if err != nil {
		t.Fatal(err)
	}
	if res.Watermark.Segment != 1 || res.Plan.Stop != StopNotDurable || res.Plan.StopSegment != 2 {
		t.Fatalf("shared pass: mark %+v, plan %s", res.Watermark, res.Plan.Reason)
	}
	// From the bucket alone, every event above the mark is still there:
	// segment 2's in its tail object, the only off-box copy. Checked by
	// decoding every object, and by a cold load (which stops at the hole in
	// the segment ids unless asked to continue through the tail objects).
	bucketHasEvents(t, b, 0, evs, res.Watermark.Seq)
	ro, _, cleanup, err := coldload.ReadOnlyWith(ctx, b, 0, t.TempDir(), coldload.Options{AllowPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	wantPage(t, "restore", scanAll(t, ro), evs, res.Watermark.Seq)
}

// bucketHasEvents decodes every segment and tail object of shard above the
// mark and checks that together they hold every event of evs above
// reclaimedSeq, byte for byte (an event in two objects must be identical).
func bucketHasEvents(t testing.TB, b blobtier.Bucket, shard uint32, evs []localseg.Event, reclaimedSeq uint64) {
	t.Helper()
	ctx := context.Background()
	seen := map[uint64]localseg.Frame{}
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for info, err := range b.List(ctx, shard, kind) {
			if err != nil {
				t.Fatal(err)
			}
			data, _, err := b.Get(ctx, info.Key)
			if err != nil {
				t.Fatal(err)
			}
			for f, err := range localseg.Frames(data) {
				if err != nil {
					t.Fatalf("%s: %v", info.Key, err)
				}
				if f.Kind != localseg.KindEvent {
					continue
				}
				if prev, ok := seen[f.Seq]; ok && prev != f {
					t.Fatalf("%s holds event %d as %+v, another object as %+v", info.Key, f.Seq, f, prev)
				}
				seen[f.Seq] = f
			}
		}
	}
	for seq := reclaimedSeq + 1; seq <= uint64(len(evs)); seq++ {
		f, ok := seen[seq]
		ev := evs[seq-1]
		if !ok {
			t.Fatalf("event %d is nowhere in the bucket", seq)
		}
		if f.Payload != ev.Payload || f.ExecutionID != ev.ExecutionID || f.TransactionID != ev.TransactionID {
			t.Fatalf("event %d in the bucket is %+v, want %+v", seq, f, ev)
		}
	}
}

// TestSharedRetriesAFailedDelete: the bucket refuses one delete; the pass
// still succeeds (the watermark is committed, readers skip the object),
// counts the failure, and the next pass deletes the orphan.
func TestSharedRetriesAFailedDelete(t *testing.T) { // §6.1
	ctx := context.Background()
	fb := faultbucket.New(s3Blob(t), 1)
	b := wrapBucket(t, fb.Bucket())
	st, evs := filled(t, t.TempDir(), localseg.Options{}, 40, "c", 30)
	ship(t, b, 0, st)
	initial := bucketKeys(t, b, 0)
	refused := blobtier.SegmentKey(0, 2)
	fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpDelete, Kind: faultbucket.Refuse, Key: refused, Times: 1})
	res, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, durableFn(t, b, 0, st))
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted.Failed != 1 || len(res.Deleted.Errors) != 1 || !slices.Contains(bucketKeys(t, b, 0), refused) {
		t.Fatalf("deleted %+v", res.Deleted)
	}
	wantPage(t, "non-owner with an orphan", coldPage(t, b, 0), evs, res.Watermark.Seq)
	again, err := Shared(ctx, st, b, 0, Owner, Policy{Enabled: true}, durableFn(t, b, 0, st))
	if err != nil || again.Deleted.Segments != 1 || again.Deleted.Failed != 0 {
		t.Fatalf("next pass deleted %+v, %v", again.Deleted, err)
	}
	if got, want := bucketKeys(t, b, 0), keysAbove(initial, res.Watermark); !slices.Equal(got, want) {
		t.Fatalf("bucket %v, want %v", got, want)
	}
}

// TestCleanupTailOnARealBucket: keys under the tail key space that do not
// parse (written around blobtier, which refuses them) are listed, counted
// and kept; a shard with no tail objects reports zero.
func TestCleanupTailOnARealBucket(t *testing.T) { // §6.7, §6.8
	ctx := context.Background()
	bb := s3Blob(t)
	b := wrapBucket(t, bb)
	if res, err := CleanupTail(ctx, b, 0, 1000); err != nil || res.Reclaimed+res.Retained+res.Unparsed+res.Failed != 0 || res.Bytes != 0 {
		t.Fatalf("empty shard: %+v, %v", res, err)
	}
	odd := []string{
		"noetl.ehdb.tail.00000000.0000000000000001",
		"noetl.ehdb.tail.00000000.0000000000000001.000000000000000A",
		"noetl.ehdb.tail.00000000.0000000000000009.0000000000000001",
		"noetl.ehdb.tail.00000000.notes.txt",
	}
	for _, k := range odd {
		if err := bb.WriteAll(ctx, k, []byte("not ours"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutIfAbsent(ctx, blobtier.TailKey(0, 1, 5), []byte("frames"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, blobtier.TailKey(0, 6, 9), []byte("more frames"), 0); err != nil {
		t.Fatal(err)
	}
	res, err := CleanupTail(ctx, b, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unparsed != len(odd) || res.Reclaimed != 1 || res.Bytes != int64(len("frames")) || res.Retained != 1 {
		t.Fatalf("cleanup %+v", res)
	}
	for _, k := range odd {
		if ok, err := bb.Exists(ctx, k); err != nil || !ok {
			t.Fatalf("unrecognised key %s deleted (%v)", k, err)
		}
	}
}
