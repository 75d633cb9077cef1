package emulator_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// Scenario 3 (issue 5, CHECKLIST §5.2, 5.5, 5.10, 5.11, 3.10, 6.5): a long
// run with keep-last-3 retention and a consumer that acks as it goes, a
// little behind the tip. Sampled every round, the local segment files, the
// bucket's segment objects and its tail objects stay bounded; afterwards the
// bucket alone restores every retained event, from the base to the tip,
// and the base offset holds.
func TestReclaimBounded(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			// A long run: the two backends run side by side.
			t.Parallel()
			t.Run("explicit", func(t *testing.T) { reclaimRun(t, be, false) })
			t.Run("periodic", func(t *testing.T) { reclaimRun(t, be, true) })
		})
	}
}

const (
	reclaimRounds   = 30
	reclaimPerRound = 100
	reclaimKeep     = 3
	// consumerLag is how far behind the tip the consumer acks.
	consumerLag = 30
)

// sample is one round's counts.
type sample struct {
	local, localSealed, bucketSegs, tails int
	activeEvents                          int
	// stale are the tail objects a durable sealed segment covers (tail
	// cleanup should have deleted them).
	stale    map[string]bool
	staleMax int
}

func take(t *testing.T, l *bucketlog.Log, b blobtier.Bucket) sample {
	t.Helper()
	snap := snapshot(t, l)
	_, sealed := sealedBytes(snap)
	tails := objects(t, b, 0, blobtier.KindTail)
	s := sample{
		local: len(snap.Segments), localSealed: sealed,
		bucketSegs:   len(objects(t, b, 0, blobtier.KindSegment)),
		tails:        len(tails),
		activeEvents: snap.Segments[len(snap.Segments)-1].Events,
	}
	s.stale = map[string]bool{}
	through := lastSealedSeq(snap)
	for _, tl := range tails {
		if tl.Parsed.LastSeq <= through {
			s.stale[tl.Key] = true
		}
	}
	return s
}

func reclaimRun(t *testing.T, be backend, periodic bool) {
	start := time.Now()
	ctx := ctxT(t)
	v := newEnv(t, be, false)
	execs := execsOf(0, 1, 7)
	root := t.TempDir()
	opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: 4096,
		GC: bucketlog.GCOptions{Enabled: true, MaxRetainedSegments: reclaimKeep}}
	if periodic {
		opts.TailInterval = 20 * time.Millisecond
		opts.GC.Interval = 20 * time.Millisecond
	} else {
		opts.NoBackground = true
	}
	l := open(t, opts)
	var want []localseg.Record
	var maxSeen sample
	var deletedSegs, deletedTails, uploaded, staleRounds int
	var prevStale map[string]bool
	for round := range reclaimRounds {
		want = append(want, appendN(t, l, execs, round*reclaimPerRound, (round+1)*reclaimPerRound, 10)...)
		tip := want[len(want)-1].Seq
		if _, err := l.Pull(ctx, "c1", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Ack(ctx, "c1", tip-consumerLag); err != nil {
			t.Fatal(err)
		}
		var s sample
		if periodic {
			// The background tasks ship and reclaim on their own: wait
			// until they have settled this round (hang guard only), then
			// sample. The bound is the same as with explicit passes.
			deadline := time.Now().Add(time.Minute)
			for {
				s = take(t, l, v.b)
				// Settled: retention applied, every sealed segment durable,
				// everything shipped, and no superseded tail object left
				// over from the previous round. The tail objects that
				// remain cover the active segment (at most one per tick
				// that found new events in it: a 4 KiB segment takes at
				// most 3 append batches of 10), plus superseded ones whose
				// put landed after this round's last cleanup listed the
				// bucket (see
				// TestBug_TailObjectLandingAfterCleanupIsNeverReclaimed);
				// the next round's cleanup must remove those, so they
				// never accumulate.
				if s.local <= reclaimKeep+1 && s.bucketSegs == s.localSealed && s.tails-len(s.stale) <= 4 &&
					!overlaps(s.stale, prevStale) && shippedTo(t, v.b, tip) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: background work did not settle: %+v", round, s)
				}
				time.Sleep(10 * time.Millisecond)
			}
		} else {
			rep, err := l.Ship(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			uploaded += rep.Upload.Uploaded
			gr, err := l.GC(ctx, bucketlog.GCRequest{MaxRetainedSegments: reclaimKeep})
			if err != nil {
				t.Fatal(err)
			}
			if gr.Shared != nil {
				deletedSegs += gr.Shared.Deleted.Segments
				deletedTails += gr.Shared.Deleted.Tails
			}
			s = take(t, l, v.b)
			// Exact, every round: retention keeps 3 segments unless the
			// lagging consumer holds one more; the bucket holds exactly the
			// sealed segments still retained; one tail object covers the
			// active segment's events, none when it has none.
			wantTails := 0
			if s.activeEvents > 0 {
				wantTails = 1
			}
			if s.local < reclaimKeep || s.local > reclaimKeep+1 || s.local != gr.SegmentsAfter ||
				s.bucketSegs != s.localSealed || s.tails != wantTails || len(s.stale) != 0 {
				t.Fatalf("round %d: %+v (gc %+v)", round, s, gr.Plan)
			}
		}
		maxSeen.local = max(maxSeen.local, s.local)
		maxSeen.bucketSegs = max(maxSeen.bucketSegs, s.bucketSegs)
		maxSeen.tails = max(maxSeen.tails, s.tails)
		if len(s.stale) > 0 {
			staleRounds++
		}
		maxSeen.staleMax = max(maxSeen.staleMax, len(s.stale))
		prevStale = s.stale
	}
	snap := snapshot(t, l)
	base := snap.ReclaimedSeq + 1
	if snap.ReclaimedSeq < uint64(len(want))-uint64(reclaimKeep+1)*40 || snap.Tip != uint64(len(want)) {
		t.Fatalf("after the run: reclaimed through %d of %d", snap.ReclaimedSeq, snap.Tip)
	}
	if wm, _, err := watermark.Read(ctx, v.b, 0); err != nil || wm.Seq != snap.ReclaimedSeq || wm.Segment != snap.ReclaimedSeg {
		t.Fatalf("watermark %+v %v, local base %d/%d", wm, err, snap.ReclaimedSeq, snap.ReclaimedSeg)
	}
	if !periodic && deletedSegs+maxSeen.bucketSegs < uploaded-1 {
		t.Fatalf("uploaded %d segments, deleted %d, %d left", uploaded, deletedSegs, maxSeen.bucketSegs)
	}
	closeLog(t, l)
	destroy(t, root)

	root2, rr := restore(t, v.b, 0, bucketlog.RestoreOptions{})
	if rr.Base != snap.ReclaimedSeq || rr.BaseSegment != snap.ReclaimedSeg || rr.FirstSeq != base || rr.LastSeq != snap.Tip {
		t.Fatalf("restore: %+v, want base %d first %d last %d", rr, snap.ReclaimedSeq, base, snap.Tip)
	}
	r := open(t, bucketlog.Options{Dir: root2, Bucket: v.b, SegmentMaxBytes: 4096, NoBackground: true})
	p := scanAll(t, r)
	if p.Base != base || !p.Clamped {
		t.Fatalf("restored scan from 0: base %d clamped %v, want base %d clamped", p.Base, p.Clamped, base)
	}
	sameRecords(t, "restored retained events", p.Records, want[base-1:])
	if c := snapshot(t, r).Consumers; !maps.Equal(c, map[string]uint64{"c1": snap.Tip - consumerLag}) {
		t.Fatalf("restored consumers %v", c)
	}
	rs := snapshot(t, r)
	if rs.ReclaimedSeq != snap.ReclaimedSeq || rs.Segments[0].ID <= snap.ReclaimedSeg {
		t.Fatalf("restored store's base %d (first segment %d), owner's %d/%d", rs.ReclaimedSeq, rs.Segments[0].ID, snap.ReclaimedSeq, snap.ReclaimedSeg)
	}
	if res := appendN(t, r, execs, len(want), len(want)+1, 1); res[0].Seq != snap.Tip+1 {
		t.Fatalf("append after restore got %d, want %d", res[0].Seq, snap.Tip+1)
	}
	figures(t, start, "events=%d rounds=%d base=%d max_local_segments=%d max_bucket_segments=%d max_tail_objects=%d rounds_with_a_superseded_tail=%d max_superseded=%d uploaded=%d deleted_segments=%d deleted_tails=%d restored=%d",
		len(want), reclaimRounds, base, maxSeen.local, maxSeen.bucketSegs, maxSeen.tails, staleRounds, maxSeen.staleMax, uploaded, deletedSegs, deletedTails, len(p.Records))
}

// shippedTo reports whether the cursor object says the bucket holds
// everything through seq.
func shippedTo(t *testing.T, b blobtier.Bucket, seq uint64) bool {
	t.Helper()
	c, _, err := tailbatch.ReadCursor(ctxT(t), b, 0)
	if err != nil && !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatal(err)
	}
	return c.ShippedThrough >= seq
}

func overlaps(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}
