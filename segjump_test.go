package bucketlog

import (
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
)

// startRecordOf reads the start record of epoch e of shard 0.
func startRecordOf(t *testing.T, b blobtier.Bucket, e uint64) fencing.StartRecord {
	t.Helper()
	data, _, err := b.Get(ctxT(t), blobtier.StartKey(0, e))
	if err != nil {
		t.Fatal(err)
	}
	r, err := fencing.DecodeStartRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func activeID(t *testing.T, l *Log) uint64 {
	t.Helper()
	snap, err := l.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap.Segments[len(snap.Segments)-1].ID
}

func wantSegmentEpoch(t *testing.T, b blobtier.Bucket, id, epoch uint64) {
	t.Helper()
	info, err := b.Stat(ctxT(t), blobtier.SegmentKey(0, id))
	if err != nil || info.Meta.Epoch != epoch {
		t.Fatalf("segment %d in the bucket: %+v %v, want epoch %d", id, info.Meta, err, epoch)
	}
}

// TestTakeoverSealLandsAtStartSegment (docs/FORMAT.md "Writer fencing",
// step 9): after a takeover's cut the new owner's store continues at the
// cut's start_segment, so its first seal is the object at start_segment;
// a stale writer's seals (below the fence, and inside the cut's gap) never
// take its keys and are skipped by a restore and by verify; the new owner
// restarts across the gap, its durable walk steps over it (GC reclaims
// through the jumped segment), and a restore keeps the ids.
func TestTakeoverSealLandsAtStartSegment(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	a := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	defer a.Close()
	r1 := startRecordOf(t, shared, 1)
	if got := activeID(t, a); got != r1.StartSegment {
		t.Fatalf("A's active segment %d, want its cut's start segment %d", got, r1.StartSegment)
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	wantSegmentEpoch(t, shared, r1.StartSegment, 1)

	bdir := t.TempDir()
	vb := newView(shared)
	b := mustOpen(t, fenceOpts(bdir, vb, false))
	r2 := startRecordOf(t, shared, 2)
	if r2.StartSegment != r2.FenceSegment+fencing.SegmentStride || r2.FenceSegment <= r1.StartSegment {
		t.Fatalf("cut %+v after %+v", r2, r1)
	}
	if got := activeID(t, b); got != r2.StartSegment {
		t.Fatalf("B's active segment %d, want the cut's start segment %d", got, r2.StartSegment)
	}
	gcReq := GCRequest{MinRetainedSegments: 1, MaxRetainedSegments: 1}
	if gc, err := b.GC(ctx, gcReq); err != nil || gc.Local.ThroughSegment != r1.StartSegment {
		t.Fatalf("B's first GC (a sweep): %+v %v", gc, err)
	}

	// The zombie A seals on, into the cut's gap (its uploads stand in as
	// epoch-1 objects at its next ids).
	for i, id := range []uint64{r2.FenceSegment, r2.FenceSegment + 1} {
		if _, err := a.store.Append(ev("zombie", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.Seal(); err != nil {
			t.Fatal(err)
		}
		snap, _ := a.store.Snapshot()
		sealed := snap.Segments[len(snap.Segments)-2]
		data, err := a.store.ReadSegment(sealed.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := shared.PutIfAbsent(ctx, blobtier.SegmentKey(0, id), data, 1); err != nil {
			t.Fatal(err)
		}
	}

	for i := 4; i <= 8; i++ {
		if _, err := b.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	wantSegmentEpoch(t, shared, r2.StartSegment, 2)
	restoreAndVerify(t, shared, 4, 8, 2, r2.StartSegment)

	// GC by key through the jumped segment: the durable walk and the
	// deletes step over the gap (no request per skipped id).
	vb.resetCounts()
	gc, err := b.GC(ctx, gcReq)
	if err != nil || gc.Local.ThroughSegment != r2.StartSegment {
		t.Fatalf("GC through the jumped segment: %+v %v", gc, err)
	}
	if n := vb.count(blobtier.OpDelete, blobtier.KindSegment.String()); n > 2 {
		t.Fatalf("GC sent %d segment deletes: it walked the gap id by id", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// A same-disk restart across the gap, more appends, a seal.
	b = mustOpen(t, fenceOpts(bdir, newView(shared), false))
	defer b.Close()
	if b.store.Tip() != 8 {
		t.Fatalf("B reopened at tip %d", b.store.Tip())
	}
	for i := 9; i <= 10; i++ {
		if _, err := b.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	wantSegmentEpoch(t, shared, r2.StartSegment+1, 2)
	restoreAndVerify(t, shared, 9, 10, 0, r2.StartSegment+1)
}

// restoreAndVerify restores shard 0 and checks it holds events first..last
// of ev("x", ·), keeps the bucket's segment id hasID, and skipped at least
// zombies objects; verify agrees.
func restoreAndVerify(t *testing.T, b blobtier.Bucket, first, last uint64, zombies int, hasID uint64) {
	t.Helper()
	ctx := ctxT(t)
	dir := t.TempDir()
	rep, err := coldload.Hydrate(ctx, b, 0, dir, coldload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ZombieObjects < zombies || rep.FirstSeq != first || rep.LastSeq != last {
		t.Fatalf("restore %+v: want %d..%d, at least %d zombie objects", rep, first, last, zombies)
	}
	st, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap, _ := st.Snapshot()
	var ids []uint64
	for _, s := range snap.Segments {
		ids = append(ids, s.ID)
	}
	if !slices.Contains(ids, hasID) {
		t.Fatalf("restored segment ids %v: want the bucket's, %d among them", ids, hasID)
	}
	recs := scanStore(t, st)
	if len(recs) != int(last-first+1) {
		t.Fatalf("restored %d records, want %d..%d", len(recs), first, last)
	}
	for i, r := range recs {
		if want := ev("x", int(first)+i).Payload; r.Payload != want || r.Seq != first+uint64(i) {
			t.Fatalf("restored record %+v, want payload %q", r, want)
		}
	}
	vr, err := coldload.Verify(ctx, b, coldload.VerifyOptions{})
	if err != nil || !vr.OK() || vr.Shards[0].Through != last || vr.Shards[0].ZombieObjects < zombies {
		t.Fatalf("verify: %v %+v %+v", err, vr.Problems, vr.Shards)
	}
}

func scanStore(t *testing.T, st *localseg.Store) []localseg.Record {
	t.Helper()
	p, err := st.Scan(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return p.Records
}

// TestTakeoverZombieSealOfItsStartSegment (sim seeds 12 and 9 of
// -sim.writers): A shipped events 1..2 as tail objects only; B takes over
// (hydrating them into its own start segment); A then seals its active
// segment, its start segment, and uploads it. B's cut put its fence at that
// id (a start segment no object held), so the zombie's copy of 1..2 lies
// in B's gap: B's restart and a restore skip it instead of finding two
// copies of 1..2 (a diverged disk; overlapping segments).
func TestTakeoverZombieSealOfItsStartSegment(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	a := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	defer a.Close()
	r1 := startRecordOf(t, shared, 1)
	for i := 1; i <= 2; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	bdir := t.TempDir()
	b := mustOpen(t, fenceOpts(bdir, newView(shared), false))
	if r2 := startRecordOf(t, shared, 2); r2.PrevEndSeq != 2 || r2.FenceSegment != r1.StartSegment {
		t.Fatalf("cut %+v: want the fence at epoch 1's start segment %d", r2, r1.StartSegment)
	}
	if _, err := a.store.Append(ev("x", 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Seal(); err != nil {
		t.Fatal(err)
	}
	data, err := a.store.ReadSegment(r1.StartSegment)
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.PutIfAbsent(ctx, blobtier.SegmentKey(0, r1.StartSegment), data, 1); err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= 4; i++ {
		if _, err := b.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = mustOpen(t, fenceOpts(bdir, newView(shared), false)) // the restart reconciles against the zombie's seal
	defer b.Close()
	if b.store.Tip() != 4 {
		t.Fatalf("B's tip %d after the restart", b.store.Tip())
	}
	restoreAndVerify(t, shared, 1, 4, 1, startRecordOf(t, shared, 2).StartSegment)
}

// TestTakeoverOverZombieSealBeyondTheCutOpens: a stale writer's seal below
// the fence with no valid frame (every event beyond the cut; a bucket whose
// fence sat above the predecessor's start segment) gets an empty segment
// file in a cold load; Open's reconcile takes that slot as holding it, not
// as a diverged disk (sim seed 13 of -sim.writers, before the fence rule
// above).
func TestTakeoverOverZombieSealBeyondTheCutOpens(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	a := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	defer a.Close()
	r1 := startRecordOf(t, shared, 1)
	// The second owner's cut, as the earlier fence rule wrote it.
	if err := shared.PutIfAbsent(ctx, blobtier.ClaimKey(0, 2), mustEncode(t, fencing.Claim{Epoch: 2, Shard: 0, Owner: "x", Nonce: fencing.NewNonce()}), 2); err != nil {
		t.Fatal(err)
	}
	r2 := fencing.NewStartRecord(2, 1, 0, r1.StartSegment, 0)
	data, err := r2.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.PutIfAbsent(ctx, blobtier.StartKey(0, 2), data, 2); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.store.Append(ev("zombie", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.store.Seal(); err != nil {
		t.Fatal(err)
	}
	seg, err := a.store.ReadSegment(r1.StartSegment)
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.PutIfAbsent(ctx, blobtier.SegmentKey(0, r1.StartSegment), seg, 1); err != nil {
		t.Fatal(err)
	}
	cdir := t.TempDir()
	c := mustOpen(t, fenceOpts(cdir, newView(shared), false))
	if c.store.Tip() != 0 {
		t.Fatalf("C's tip %d", c.store.Tip())
	}
	c.Close()
	c = mustOpen(t, fenceOpts(cdir, newView(shared), false)) // the restart reconciles against the zombie's seal
	defer c.Close()
	if c.store.Tip() != 0 {
		t.Fatalf("C's tip %d after the restart", c.store.Tip())
	}
}

func mustEncode(t *testing.T, c fencing.Claim) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReconcileSkipsAnyObjectInTheGap: the plain lineage rule on Open's
// reconcile: a segment object inside a cut's gap is skipped whatever its
// epoch (the new owner continues at start_segment, so not even its own
// epoch writes there); before the jump, reconcile judged it by its epoch
// only and took it for a segment the local store lacks (a diverged disk).
func TestReconcileSkipsAnyObjectInTheGap(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	dir := t.TempDir()
	b := mustOpen(t, fenceOpts(dir, newView(shared), false))
	r1 := startRecordOf(t, shared, 1)
	for i := 1; i <= 3; i++ {
		if _, err := b.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	data, err := b.store.ReadSegment(r1.StartSegment)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := shared.PutIfAbsent(ctx, blobtier.SegmentKey(0, r1.FenceSegment), data, 1); err != nil {
		t.Fatal(err)
	}
	b = mustOpen(t, fenceOpts(dir, newView(shared), false))
	defer b.Close()
	if b.store.Tip() != 3 {
		t.Fatalf("tip %d", b.store.Tip())
	}
}
