package coldload_test

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
)

// Bucket states of writer fencing, built by hand (docs/FORMAT.md, "Writer
// fencing"): each object carries the epoch of the writer that put it, and
// every cold load must follow the chain of start records.

// putE writes a write-once object under a writer's epoch.
func putE(t *testing.T, b blobtier.Bucket, key string, data []byte, epoch uint64) {
	t.Helper()
	if err := b.PutIfAbsent(context.Background(), key, data, epoch); err != nil {
		t.Fatalf("put %s (epoch %d): %v", key, epoch, err)
	}
}

// putCut writes a claim and its start record.
func putCut(t *testing.T, b blobtier.Bucket, shard uint32, r fencing.StartRecord) {
	t.Helper()
	c := fencing.Claim{Epoch: r.Epoch, Shard: shard, Owner: "host/boot", Nonce: fencing.NewNonce()}
	cb, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	putE(t, b, blobtier.ClaimKey(shard, r.Epoch), cb, 0)
	rb, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	putE(t, b, blobtier.StartKey(shard, r.Epoch), rb, 0)
}

func zombiePayload(seq uint64) string { return "zombie" + plain(seq) }
func ownerPayload(seq uint64) string  { return "owner" + plain(seq) }

// payloads returns each restored record's payload by sequence.
func payloads(t *testing.T, dir string) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	recs := allRecords(t, openRO(t, dir))
	if len(recs) > 0 {
		gapless(t, recs, recs[0].Seq)
	}
	for _, r := range recs {
		out[r.Seq] = r.Payload
	}
	return out
}

// wantHistory fails unless the restored store holds exactly 1..len(want)
// with those payload functions per range.
func wantHistory(t *testing.T, got map[uint64]string, last uint64, payload func(seq uint64) string) {
	t.Helper()
	if uint64(len(got)) != last {
		t.Fatalf("restored %d events, want 1..%d", len(got), last)
	}
	for s := uint64(1); s <= last; s++ {
		if got[s] != payload(s) {
			t.Fatalf("sequence %d holds %q, want %q", s, got[s], payload(s))
		}
	}
}

// zombieAfterCut is the bucket of the measurement: epoch 0 (every
// bucket before fencing) shipped 1..8, epoch 1 cut it at 8, and the zombie
// kept shipping 9..12 after the cut. withOwner adds the new owner's own
// tail 9..11.
func zombieAfterCut(t *testing.T, b blobtier.Bucket, withOwner bool) {
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	put(t, b, blobtier.TailKey(0, 6, 8), frames(t, evFrames(6, 8, plain)...))
	putCut(t, b, 0, fencing.NewStartRecord(1, 0, 8, 1, 0))
	putE(t, b, blobtier.TailKey(0, 9, 12), frames(t, evFrames(9, 12, zombiePayload)...), 0)
	if withOwner {
		putE(t, b, blobtier.TailKey(0, 9, 11), frames(t, evFrames(9, 11, ownerPayload)...), 1)
	}
}

// TestLineageDropsZombieTailAfterCut: the zombie's tail beyond prev_end is
// dropped and counted, with or without the new owner's events after the
// cut; Verify agrees and names the lineage. Kills the mutant "readers
// without lineage".
func TestLineageDropsZombieTailAfterCut(t *testing.T) {
	for _, withOwner := range []bool{false, true} {
		b, _ := memBucket(t)
		zombieAfterCut(t, b, withOwner)
		dir, rep := mustHydrate(t, b, 0, coldload.Options{})
		last := uint64(8)
		if withOwner {
			last = 11
		}
		wantHistory(t, payloads(t, dir), last, func(s uint64) string {
			if s > 8 {
				return ownerPayload(s)
			}
			return plain(s)
		})
		if rep.ZombieObjects != 1 || !slices.Equal(rep.Lineage.Epochs, []uint64{0, 1}) || len(rep.Lineage.Cuts) != 1 || rep.Lineage.Cuts[0].PrevEndSeq != 8 {
			t.Fatalf("owner %v: report zombies %d lineage %+v", withOwner, rep.ZombieObjects, rep.Lineage)
		}
		vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
		if err != nil || !vr.OK() {
			t.Fatalf("verify: %v %+v", err, vr.Problems)
		}
		if sr := vr.Shards[0]; sr.ZombieObjects != 1 || sr.Through != last || len(sr.Lineage.Cuts) != 1 {
			t.Fatalf("verify shard report: %+v", sr)
		}
	}
}

// noLineage reads a bucket as a reader without the lineage rule would: it
// sees no start record and every object as epoch 0.
type noLineage struct{ coldload.Reader }

func (n noLineage) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	data, m, err := n.Reader.Get(ctx, key)
	m.Epoch = 0
	return data, m, err
}

func (n noLineage) List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	if kind == blobtier.KindStart || kind == blobtier.KindClaim {
		return func(func(blobtier.ObjectInfo, error) bool) {}
	}
	return n.Reader.List(ctx, shard, kind)
}

// TestLineageRedControlZombieHistoryWithoutFilter: the RED control. The
// same bucket read without the lineage restores the zombie's history
// (9..12, never acknowledged: the zombie was fenced), so the test above
// would fail on a reader that does not filter.
func TestLineageRedControlZombieHistoryWithoutFilter(t *testing.T) {
	b, _ := memBucket(t)
	zombieAfterCut(t, b, false)
	dir, rep := mustHydrate(t, noLineage{b}, 0, coldload.Options{})
	got := payloads(t, dir)
	if len(got) != 12 || got[12] != zombiePayload(12) || rep.ZombieObjects != 0 {
		t.Fatalf("without the lineage: %d events, 12 = %q, zombies %d; the control should restore the zombie's history", len(got), got[12], rep.ZombieObjects)
	}
}

// TestLineageSkipsZombieSegmentsAtAndAboveFence: the zombie's segments at
// ids at or above the fence (inside the cut's gap, and at the new owner's
// ids) are skipped and counted; the gap between fence and start segment is
// allowed; a lower-epoch segment at an id the fence rule skips holds no
// frame in the restore; the restore keeps the bucket's ids.
func TestLineageSkipsZombieSegmentsAtAndAboveFence(t *testing.T) {
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(6, 10, plain)...))
	cut := fencing.NewStartRecord(1, 0, 10, 2, 0)
	putCut(t, b, 0, cut)
	// The zombie (epoch 0) seals on: id 3 is the fence (inside the gap).
	putE(t, b, blobtier.SegmentKey(0, cut.FenceSegment), frames(t, evFrames(11, 15, zombiePayload)...), 0)
	// The new owner seals 11..14 at its start segment; the zombie got to
	// the next id first (a lower-epoch segment at a skipped id).
	putE(t, b, blobtier.SegmentKey(0, cut.StartSegment), frames(t, evFrames(11, 14, ownerPayload)...), 1)
	// It holds events within the cut (identical bytes): only the fence
	// rule tells it is not the log's.
	putE(t, b, blobtier.SegmentKey(0, cut.StartSegment+1), frames(t, evFrames(9, 10, plain)...), 0)
	putE(t, b, blobtier.TailKey(0, 15, 16), frames(t, evFrames(15, 16, ownerPayload)...), 1)
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	wantHistory(t, payloads(t, dir), 16, func(s uint64) string {
		if s > 10 {
			return ownerPayload(s)
		}
		return plain(s)
	})
	if rep.ZombieObjects != 2 || rep.HighestSegmentID != cut.StartSegment+1 || rep.Lineage.HighestStartSegment != cut.StartSegment {
		t.Fatalf("zombie objects %d (want 2: the fence segment and the one at start+1), highest %d, %+v", rep.ZombieObjects, rep.HighestSegmentID, rep.Lineage)
	}
	// Ids 1, 2, then the gap kept (a recorded jump), the start segment,
	// the zombie's slot (an empty file), then the append store's segment.
	if ids := segmentFiles(t, dir); !slices.Equal(ids, []uint64{1, 2, cut.StartSegment, cut.StartSegment + 1, cut.StartSegment + 2}) || rep.NextSegment != cut.StartSegment+2 {
		t.Fatalf("segment files %v, next %d", ids, rep.NextSegment)
	}
	vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
	if err != nil || !vr.OK() || vr.Shards[0].ZombieObjects != 2 || vr.Shards[0].Through != 16 {
		t.Fatalf("verify: %v %+v %+v", err, vr.Problems, vr.Shards)
	}
	// A reopened restore is a working store.
	st := openRW(t, dir)
	if st.Tip() != 16 {
		t.Fatalf("reopened tip %d", st.Tip())
	}
}

// TestLineageSegmentGapOutsideACutIsAHole: ids may skip only inside a
// cut's gap; a missing id below the fence is still a hole.
func TestLineageSegmentGapOutsideACutIsAHole(t *testing.T) {
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	// segment 2 (6..10) is missing
	cut := fencing.NewStartRecord(1, 0, 10, 2, 0)
	putCut(t, b, 0, cut)
	putE(t, b, blobtier.SegmentKey(0, cut.StartSegment), frames(t, evFrames(11, 14, ownerPayload)...), 1)
	dir := target(t, 0)
	_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
	mustErrIs(t, err, coldload.ErrGap)
	absentOrEmpty(t, dir)
}

// TestLineageOffChainCutIsInvisible: X claimed 2 and stalled; Y claimed 3,
// chained to 1 and cut it at 10; then X wrote its cut (at 12) and a tail.
// X's epoch is off the chain and invisible; epoch 1's events up to Y's cut
// survive, its events beyond are dropped. Kills the mutant "lineage by
// epoch number instead of the chain" (it takes X's cut as epoch 1's end).
func TestLineageOffChainCutIsInvisible(t *testing.T) {
	b, _ := memBucket(t)
	r1 := fencing.NewStartRecord(1, 0, 0, 0, 0)
	putCut(t, b, 0, r1)
	putE(t, b, blobtier.TailKey(0, 1, 5), frames(t, evFrames(1, 5, plain)...), 1)
	putE(t, b, blobtier.TailKey(0, 6, 10), frames(t, evFrames(6, 10, plain)...), 1)
	putCut(t, b, 0, fencing.NewStartRecord(3, 1, 10, r1.StartSegment, 0)) // Y
	putE(t, b, blobtier.TailKey(0, 11, 12), frames(t, evFrames(11, 12, zombiePayload)...), 1)
	putCut(t, b, 0, fencing.NewStartRecord(2, 1, 12, r1.StartSegment, 0)) // X, too late
	putE(t, b, blobtier.TailKey(0, 13, 14), frames(t, evFrames(13, 14, zombiePayload)...), 2)
	putE(t, b, blobtier.TailKey(0, 11, 13), frames(t, evFrames(11, 13, ownerPayload)...), 3)
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	wantHistory(t, payloads(t, dir), 13, func(s uint64) string {
		if s > 10 {
			return ownerPayload(s)
		}
		return plain(s)
	})
	if rep.ZombieObjects != 2 || !slices.Equal(rep.Lineage.Epochs, []uint64{0, 1, 3}) || !slices.Equal(rep.Lineage.OffChain, []uint64{2}) {
		t.Fatalf("zombies %d, lineage %+v", rep.ZombieObjects, rep.Lineage)
	}
}

// TestLineageZombieAcksFollowTheirEvents: a consumer frame goes with the
// next Event frame of its object, so the zombie's acks after the cut are
// dropped with its events (and the one after its last valid event too,
// since an invalid event follows it); an ack at the end of a valid object
// follows the event before it. Kills the mutant "consumer frames not
// following their events".
func TestLineageZombieAcksFollowTheirEvents(t *testing.T) {
	b, _ := memBucket(t)
	ev := func(s uint64) localseg.Frame { return evFrames(s, s, plain)[0] }
	ack := func(s uint64) localseg.Frame { return localseg.Frame{Kind: localseg.KindAck, Consumer: "c", Seq: s} }
	create := localseg.Frame{Kind: localseg.KindConsumerCreate, Consumer: "c"}
	put(t, b, blobtier.TailKey(0, 1, 4), frames(t, ev(1), create, ev(2), ev(3), ev(4), ack(2)))
	putCut(t, b, 0, fencing.NewStartRecord(1, 0, 6, 0, 0))
	// The zombie's object straddles the cut: 5, 6 valid; its ack of 6 sits
	// before event 7 (beyond the cut) and goes with it.
	put(t, b, blobtier.TailKey(0, 5, 7), frames(t, ev(5), ev(6), ack(6), ev(7), ack(7)))
	// The zombie's object after the cut: dropped whole, acks included.
	put(t, b, blobtier.TailKey(0, 8, 8), frames(t, ack(7), ev(8), ack(8)))
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	st := openRO(t, dir)
	if st.Tip() != 6 {
		t.Fatalf("tip %d, want 6", st.Tip())
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := snap.Consumers["c"]; !ok || c != 2 {
		t.Fatalf("consumer c at %d (%v), want 2: the zombie's acks after the cut must not count", c, ok)
	}
	if rep.ZombieObjects != 1 {
		t.Fatalf("zombie objects %d, want 1", rep.ZombieObjects)
	}
}

// TestLineageValidDuplicatesMustBeIdentical: two valid copies of one
// sequence that differ are a hard error naming both keys; a zombie's frame
// beyond its cut that differs from the new owner's is no conflict.
func TestLineageValidDuplicatesMustBeIdentical(t *testing.T) {
	b, _ := memBucket(t)
	seg := blobtier.SegmentKey(0, 1)
	put(t, b, seg, frames(t, evFrames(1, 6, plain)...))
	putCut(t, b, 0, fencing.NewStartRecord(1, 0, 6, 1, 0))
	putE(t, b, blobtier.TailKey(0, 7, 9), frames(t, evFrames(7, 9, ownerPayload)...), 1)
	putE(t, b, blobtier.TailKey(0, 7, 8), frames(t, evFrames(7, 8, zombiePayload)...), 0)
	if _, rep := mustHydrate(t, b, 0, coldload.Options{}); rep.ZombieObjects != 1 || rep.LastSeq != 9 {
		t.Fatalf("zombie beyond its cut: zombies %d, last %d", rep.ZombieObjects, rep.LastSeq)
	}
	// A valid (epoch 0, at or below the cut) copy of 5..6 with other bytes.
	bad := blobtier.TailKey(0, 5, 7)
	put(t, b, bad, frames(t, evFrames(5, 7, zombiePayload)...))
	dir := target(t, 0)
	_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
	mustErrIs(t, err, coldload.ErrConflict)
	mustContain(t, err, seg, bad)
	absentOrEmpty(t, dir)
	noLeftovers(t, dir)
}

// TestLineageLegacyBucketRestoresInFull: a bucket written by today's code
// (no claim, no start record, no epoch metadata) is the lineage of epoch 0
// and restores in full.
func TestLineageLegacyBucketRestoresInFull(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 4096)
	o.append(40)
	o.seal()
	o.publish()
	o.append(7)
	o.ship()
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
	if rep.ZombieObjects != 0 || !slices.Equal(rep.Lineage.Epochs, []uint64{0}) || len(rep.Lineage.Cuts) != 0 {
		t.Fatalf("legacy report: zombies %d lineage %+v", rep.ZombieObjects, rep.Lineage)
	}
}

// TestLineageBrokenChainRefusedBeforeWriting: a start record naming a
// predecessor whose record is missing, or a damaged start record, is
// refused with a clear error and nothing is written locally; Verify
// reports it as a lineage problem.
func TestLineageBrokenChainRefusedBeforeWriting(t *testing.T) {
	for name, c := range map[string]struct {
		setup func(t *testing.T, b blobtier.Bucket)
		is    error
	}{
		"missing predecessor": {func(t *testing.T, b blobtier.Bucket) {
			r1 := fencing.NewStartRecord(1, 0, 5, 1, 0)
			putCut(t, b, 0, r1)
			putCut(t, b, 0, fencing.NewStartRecord(3, 2, 8, r1.StartSegment, 0))
		}, fencing.ErrBrokenChain},
		"damaged record": {func(t *testing.T, b blobtier.Bucket) {
			putE(t, b, blobtier.StartKey(0, 1), []byte(`{"epoch":1}`), 0)
		}, fencing.ErrBadRecord},
	} {
		t.Run(name, func(t *testing.T) {
			b, _ := memBucket(t)
			put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
			c.setup(t, b)
			dir := target(t, 0)
			_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
			mustErrIs(t, err, coldload.ErrLineage, c.is)
			absentOrEmpty(t, dir)
			noLeftovers(t, dir)
			vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
			if err != nil || len(vr.Problems) != 1 || vr.Problems[0].Class != coldload.ProblemLineage {
				t.Fatalf("verify: %v %+v", err, vr.Problems)
			}
		})
	}
}

// TestLineageCutsAStraddlingSegment: a segment of an ended epoch holding
// events on both sides of its cut (parallel uploads can land one after the
// claimant's listing) keeps only its valid prefix.
func TestLineageCutsAStraddlingSegment(t *testing.T) {
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	putCut(t, b, 0, fencing.NewStartRecord(1, 0, 10, 2, 0))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(6, 12, func(s uint64) string {
		if s > 10 {
			return zombiePayload(s)
		}
		return plain(s)
	})...))
	putE(t, b, blobtier.TailKey(0, 11, 13), frames(t, evFrames(11, 13, ownerPayload)...), 1)
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	wantHistory(t, payloads(t, dir), 13, func(s uint64) string {
		if s > 10 {
			return ownerPayload(s)
		}
		return plain(s)
	})
	if rep.ZombieObjects != 0 || rep.Segments != 2 {
		t.Fatalf("zombies %d segments %d", rep.ZombieObjects, rep.Segments)
	}
	vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
	if err != nil || !vr.OK() || vr.Shards[0].Through != 13 {
		t.Fatalf("verify: %v %+v %+v", err, vr.Problems, vr.Shards)
	}
}

// TestLineageToleratesEpochFieldsOfWatermarkAndCursor: the writer bumps
// `epoch` (and adds `durable_seq`) inside the watermark and the cursor
// object; a cold load reads them as before.
func TestLineageToleratesEpochFieldsOfWatermarkAndCursor(t *testing.T) {
	b, _ := memBucket(t)
	ctx := context.Background()
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(6, 10, plain)...))
	putCut(t, b, 0, fencing.NewStartRecord(1, 0, 10, 2, 5))
	putE(t, b, blobtier.TailKey(0, 11, 12), frames(t, evFrames(11, 12, ownerPayload)...), 1)
	if err := b.Put(ctx, blobtier.WatermarkKey(0), []byte(`{"seq":5,"segment":1,"v":3,"epoch":1,"durable_seq":12}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, blobtier.CursorKey(0), []byte(`{"v":4,"shipped_through":12,"consumers":{"c":11},"epoch":1}`)); err != nil {
		t.Fatal(err)
	}
	_, rep := mustHydrate(t, b, 0, coldload.Options{})
	if rep.Base != 5 || rep.LastSeq != 12 || rep.ShippedThrough != 12 || rep.Consumers != 1 || rep.CursorDamaged {
		t.Fatalf("report %+v", rep)
	}
}

// midRead runs inject once, right after the first listing of tail objects
// or start records ends: a takeover and a zombie's put landing while a
// reader is between its listings.
type midRead struct {
	blobtier.Bucket
	inject func()
	done   bool
}

func (m *midRead) List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	inner := m.Bucket.List(ctx, shard, kind)
	return func(yield func(blobtier.ObjectInfo, error) bool) {
		for info, err := range inner {
			if !yield(info, err) {
				return
			}
		}
		if !m.done && (kind == blobtier.KindTail || kind == blobtier.KindStart) {
			m.done = true
			m.inject()
		}
	}
}

// TestLineageCutDuringTheRead: a cut, the new owner's tail and a zombie's
// tail beyond the cut all land between the reader's listings. Start
// records are listed after the data, so the restore is a prefix of the
// valid history (here epoch 0's 1..8), never the zombie's. Kills the
// mutant that lists the start records before the data (it restores the
// zombie's 9..12 and skips the owner's tail as off the chain).
func TestLineageCutDuringTheRead(t *testing.T) {
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	put(t, b, blobtier.TailKey(0, 6, 8), frames(t, evFrames(6, 8, plain)...))
	r := &midRead{Bucket: b, inject: func() {
		putCut(t, b, 0, fencing.NewStartRecord(1, 0, 8, 1, 0))
		putE(t, b, blobtier.TailKey(0, 9, 12), frames(t, evFrames(9, 12, zombiePayload)...), 0)
		putE(t, b, blobtier.TailKey(0, 9, 10), frames(t, evFrames(9, 10, ownerPayload)...), 1)
	}}
	dir, _ := mustHydrate(t, r, 0, coldload.Options{})
	wantHistory(t, payloads(t, dir), 8, plain)
	// The next read sees everything: the owner's history after the cut.
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	wantHistory(t, payloads(t, dir), 10, func(s uint64) string {
		if s > 8 {
			return ownerPayload(s)
		}
		return plain(s)
	})
	if rep.ZombieObjects != 1 {
		t.Fatalf("zombie objects %d", rep.ZombieObjects)
	}
}

// TestLineageEpochThatSealedNothing: epoch 1 took over and shipped only
// tail objects; epoch 2 took over from it (its fence right above epoch 1's
// start segment, which no object holds) and sealed. The unused start
// segment is no hole, and the restored ids run consecutively.
func TestLineageEpochThatSealedNothing(t *testing.T) {
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 5, plain)...))
	r1 := fencing.NewStartRecord(1, 0, 5, 1, 0)
	putCut(t, b, 0, r1)
	putE(t, b, blobtier.TailKey(0, 6, 8), frames(t, evFrames(6, 8, ownerPayload)...), 1)
	r2 := fencing.NewStartRecord(2, 1, 8, r1.StartSegment, 0)
	putCut(t, b, 0, r2)
	putE(t, b, blobtier.SegmentKey(0, r2.StartSegment), frames(t, evFrames(6, 10, ownerPayload)...), 2)
	putE(t, b, blobtier.SegmentKey(0, r2.StartSegment+1), frames(t, evFrames(11, 12, ownerPayload)...), 2)
	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	wantHistory(t, payloads(t, dir), 12, func(s uint64) string {
		if s > 5 {
			return ownerPayload(s)
		}
		return plain(s)
	})
	if ids := segmentFiles(t, dir); !slices.Equal(ids, []uint64{1, r2.StartSegment, r2.StartSegment + 1, r2.StartSegment + 2}) || rep.NextSegment != r2.StartSegment+2 {
		t.Fatalf("segment files %v, next %d", ids, rep.NextSegment)
	}
	if st := openRW(t, dir); st.Tip() != 12 {
		t.Fatalf("reopened tip %d", st.Tip())
	}
	vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
	if err != nil || !vr.OK() || vr.Shards[0].Through != 12 {
		t.Fatalf("verify: %v %+v %+v", err, vr.Problems, vr.Shards)
	}
}
