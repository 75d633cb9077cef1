package emulator_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
	"github.com/bucketlog/bucketlog/watermark"
)

// Scenario 4 (CHECKLIST §6.6, end to end): segments durable / not yet
// uploaded / durable. The bucket refuses the put of exactly segment 2.
//
// The engine uploads sealed segments in id order and stops at the first
// failure, so by itself it never makes segment 3 durable while segment 2
// is not. The middle hole arises when segment 3's object is already in the
// bucket from an earlier uploader (another run, a manual ship): the test
// puts segment 3's exact local bytes there, and the restarted engine finds
// it durable (same length and digest) while segment 2 is refused.
//
// Then: GC reclaims segment 1 only and commits the watermark there (never
// past the first non-durable segment); the tail objects covering segments
// 2 and 3 stay; a restore from the bucket alone of that state is reported
// below; once the bucket takes segment 2, every event ships and restores.
// RED control: without the tail objects that cover segment 2 (what a
// cleanup using the highest durable segment instead of the contiguous one
// would delete), the same restore loses every event after the hole.
func TestSafetyDurableHoleDurable(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) { safetyCase(t, be) })
	}
}

func safetyCase(t *testing.T, be backend) {
	start := time.Now()
	ctx := ctxT(t)
	v := newEnv(t, be, true)
	execs := execsOf(0, 1, 4)
	root := t.TempDir()
	opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true}
	l := open(t, opts)

	// Segment 1: 1..20, durable.
	want := appendN(t, l, execs, 0, 20, 1)
	if rep, err := l.Ship(ctx, true); err != nil || rep.Upload.Uploaded != 1 {
		t.Fatalf("segment 1: %+v %v", rep, err)
	}
	seg2Key := blobtier.SegmentKey(0, segN(t, l, 2))
	refuse := v.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: seg2Key})

	// Segment 2: 21..40, shipped as a tail object, then sealed: its upload
	// is refused.
	want = append(want, appendN(t, l, execs, 20, 40, 1)...)
	if rep, err := l.Ship(ctx, false); err != nil || rep.TailBatches != 1 || rep.ShippedThrough != 40 {
		t.Fatalf("tail of segment 2: %+v %v", rep, err)
	}
	if _, err := l.Ship(ctx, true); err == nil {
		t.Fatal("segment 2 uploaded through a refusing bucket")
	}
	// Segment 3: 41..60, sealed; the uploader is stuck on segment 2 and
	// does not try it. (Ship returns at the failed upload without shipping
	// the tail; Close's last shipment ships it.)
	want = append(want, appendN(t, l, execs, 40, 60, 1)...)
	if _, err := l.Ship(ctx, true); err == nil {
		t.Fatal("ship succeeded with segment 2 refused")
	}
	seg3ID := segN(t, l, 3)
	seg3, err := l.Store().ReadSegment(seg3ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err == nil {
		t.Fatal("Close's last shipment reported no failure with segment 2 refused")
	}
	if v.fb.Fired(refuse) < 3 {
		t.Fatalf("the refusal fired %d times", v.fb.Fired(refuse))
	}
	// The earlier uploader's object for segment 3, under the writer's epoch
	// (segment 1's: writer fencing puts it on every object).
	seg1, err := v.b.Stat(ctx, blobtier.SegmentKey(0, seg3ID-2))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.b.PutIfAbsent(ctx, blobtier.SegmentKey(0, seg3ID), seg3, seg1.Meta.Epoch); err != nil {
		t.Fatal(err)
	}

	// Restart: segment 1 and 3 durable, 2 not.
	l = open(t, opts)
	if or := l.OpenReport(); or.DurableSegments != 2 || or.ShippedThrough != 60 {
		t.Fatalf("open report: %+v", or)
	}
	if _, err := l.Pull(ctx, "c1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "c1", 60); err != nil {
		t.Fatal(err)
	}
	gr, err := l.GC(ctx, bucketlog.GCRequest{MaxRetainedSegments: 2})
	if err != nil {
		t.Fatal(err)
	}
	o := seg3ID - 3 // segment n is o+n (the writer's ids start at its cut's start segment)
	if !slices.Equal(gr.Plan.Remove, []uint64{o + 1}) || gr.Plan.Stop != reclaim.StopNotDurable || gr.Plan.StopSegment != o+2 {
		t.Fatalf("GC plan: remove %v, stop %q at %d; want [1], not_durable at 2", gr.Plan.Remove, gr.Plan.Stop, gr.Plan.StopSegment)
	}
	wm, _, err := watermark.Read(ctx, v.b, 0)
	if err != nil || wm.Seq != 20 || wm.Segment != o+1 {
		t.Fatalf("watermark %+v %v, want sequence 20 segment 1", wm, err)
	}
	snap := snapshot(t, l)
	var ids []uint64
	for _, s := range snap.Segments {
		ids = append(ids, s.ID)
	}
	if snap.ReclaimedSeq != 20 || !slices.Equal(ids, []uint64{o + 2, o + 3, o + 4}) {
		t.Fatalf("local after GC: base %d segments %v", snap.ReclaimedSeq, ids)
	}
	var segIDs []uint64
	for _, s := range objects(t, v.b, 0, blobtier.KindSegment) {
		segIDs = append(segIDs, s.Parsed.Segment)
	}
	tails := objects(t, v.b, 0, blobtier.KindTail)
	if !slices.Equal(segIDs, []uint64{o + 3}) || tailCoverage(tails, 21) < 60 {
		t.Fatalf("bucket after GC: segments %v, tail objects %v (cover through %d from 21)", segIDs, tails, tailCoverage(tails, 21))
	}
	// A more aggressive explicit pass changes nothing: segment 2 still
	// holds the boundary.
	if gr, err := l.GC(ctx, bucketlog.GCRequest{MinRetainedSegments: 1, MaxRetainedSegments: 1}); err != nil || len(gr.Plan.Remove) != 0 {
		t.Fatalf("second GC: %+v %v", gr.Plan, err)
	}

	// A restore of the bucket as it is now stops at the hole, though tail
	// objects cover it. bucketlog.Restore flattens the *coldload.GapError
	// into text (TestBug_RestoreErrorHidesGapError), so the details are
	// checked on coldload.Hydrate, which Restore runs.
	_, err = bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: v.b, Dir: t.TempDir()})
	if !errors.Is(err, bucketlog.ErrInvalidState) || !strings.Contains(err.Error(), fmt.Sprintf("segments %d..%d missing (sequences 21..40)", o+2, o+2)) {
		t.Fatalf("restore over the hole: %v, want an invalid state naming segment 2", err)
	}
	t.Logf("restore without AllowPartial: %v", err)
	_, err = coldload.Hydrate(ctx, v.b, 0, localseg.ShardDir(t.TempDir(), 0), coldload.Options{})
	var gap *coldload.GapError
	if !errors.As(err, &gap) || gap.FromSegment != o+2 || gap.ToSegment != o+2 || gap.FromSeq != 21 || gap.ToSeq != 40 || !gap.CoveredByTail {
		t.Fatalf("hydrate over the hole: %v, want a gap at segment 2 (21..40) covered by tail objects", err)
	}
	part, prr := restore(t, v.b, 0, bucketlog.RestoreOptions{AllowPartial: true})
	sameRecords(t, "partial restore over a hole covered by tail objects", readOnlyRecords(t, part, 0, 1).Records, want[20:])
	t.Logf("restore with AllowPartial: first %d last %d, tail records %d, gaps %v, filler segments %d, next segment %d",
		prr.FirstSeq, prr.LastSeq, prr.TailRecords, prr.Gaps, prr.FillerSegments, prr.NextSegment)
	if prr.NextSegment <= o+3 {
		t.Fatalf("partial restore's next segment %d is not above the bucket's segment 3", prr.NextSegment)
	}
	// (That restored store cannot be opened with its bucket:
	// TestBug_PartialRestoreOverCoveredHoleIsRefusedByOpen.)

	// RED control: the same bucket without the tail objects that cover
	// segment 2 (kept aside and put back after).
	var covering []blobtier.ObjectInfo
	for _, tl := range tails {
		if tl.Parsed.FirstSeq <= 40 && tl.Parsed.LastSeq >= 21 {
			covering = append(covering, tl)
		}
	}
	saved := map[string][]byte{}
	for _, tl := range covering {
		data, _, err := v.b.Get(ctx, tl.Key)
		if err != nil {
			t.Fatal(err)
		}
		saved[tl.Key] = data
		if err := v.b.Delete(ctx, tl.Key); err != nil {
			t.Fatal(err)
		}
	}
	_, err = coldload.Hydrate(ctx, v.b, 0, localseg.ShardDir(t.TempDir(), 0), coldload.Options{})
	if !errors.As(err, &gap) || gap.CoveredByTail {
		t.Fatalf("RED control: restore without the covering tail objects = %v, want an uncovered gap", err)
	}
	redRoot, red := restore(t, v.b, 0, bucketlog.RestoreOptions{AllowPartial: true})
	redGot := readOnlyRecords(t, redRoot, 0, 1).Records
	lost := 60 - 20 - len(redGot)
	if lost != 40 {
		t.Fatalf("RED control: partial restore kept %d events after the base (through %d), lost %d; want all 40 after the hole lost", len(redGot), red.LastSeq, lost)
	}
	for k, data := range saved {
		if err := v.b.PutIfAbsent(ctx, k, data, 0); err != nil {
			t.Fatal(err)
		}
	}

	// The bucket takes segment 2 again: it ships, cleanup removes the tail
	// objects the durable segments now cover, GC moves on, and the bucket
	// alone restores every retained event.
	v.fb.Remove(refuse)
	if rep, err := l.Ship(ctx, false); err != nil || rep.Upload.Uploaded != 1 {
		t.Fatalf("ship after the bucket recovered: %+v %v", rep, err)
	}
	if n := len(objects(t, v.b, 0, blobtier.KindTail)); n != 0 {
		t.Fatalf("%d tail objects left once segments 2 and 3 are durable", n)
	}
	want = append(want, appendN(t, l, execs, 60, 80, 1)...)
	if rep, err := l.Ship(ctx, true); err != nil || rep.ShippedThrough != 80 {
		t.Fatalf("ship of 61..80: %+v %v", rep, err)
	}
	full, frr := restore(t, v.b, 0, bucketlog.RestoreOptions{})
	if frr.Base != 20 {
		t.Fatalf("restore after recovery: %+v", frr)
	}
	sameRecords(t, "restore after recovery", readOnlyRecords(t, full, 0, 1).Records, want[20:])
	gr, err = l.GC(ctx, bucketlog.GCRequest{MaxRetainedSegments: 2})
	if err != nil || !slices.Equal(gr.Plan.Remove, []uint64{o + 2, o + 3}) {
		t.Fatalf("GC after recovery: %+v %v", gr.Plan, err)
	}
	closeLog(t, l)
	destroy(t, root)
	final, frr := restore(t, v.b, 0, bucketlog.RestoreOptions{})
	got := readOnlyRecords(t, final, 0, 1)
	if frr.Base != 60 || got.Base != 61 {
		t.Fatalf("final restore: %+v, scan base %d", frr, got.Base)
	}
	sameRecords(t, "final restore", got.Records, want[60:])
	figures(t, start, "events=60 partial_restore_over_covered_hole=%d red_lost=%d final_base=%d", len(want[20:]), lost, frr.Base)
}
