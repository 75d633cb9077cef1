package coldload_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// CHECKLIST §3.4: the owner's sealed segments reach the bucket; a non-owner
// cold-loads them and sees the same events.
func TestNonOwnerColdLoadSeesOwnersSealedEvents(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 4096)
	o.append(120)
	o.seal()
	ids := o.publish()
	if len(ids) < 3 {
		t.Fatalf("want several sealed segments, got %d", len(ids))
	}

	st, rep, cleanup, err := coldload.ReadOnlyWith(ctxT(t), b, 0, t.TempDir(), coldload.Options{})
	if err != nil {
		t.Fatalf("cold load: %v", err)
	}
	defer cleanup()
	sameRecords(t, allRecords(t, st), o.records())
	if rep.Segments != len(ids) || rep.LastSeq != 120 || rep.FirstSeq != 1 {
		t.Fatalf("report %+v: want %d segments, sequences 1..120", rep, len(ids))
	}
	// Per-execution reads agree too.
	for _, exec := range []string{"100", "103", "106"} {
		got, err := st.ReadExecution(exec, 0, 1000)
		if err != nil {
			t.Fatalf("read execution %s: %v", exec, err)
		}
		want, err := o.st.ReadExecution(exec, 0, 1000)
		if err != nil {
			t.Fatalf("owner read execution %s: %v", exec, err)
		}
		sameRecords(t, got.Records, want.Records)
	}
}

// CHECKLIST §3.5: a new owner with an empty disk hydrates from the bucket
// and continues the sequence; its next segment id is above every id the
// bucket has seen, so its own uploads never meet an existing key.
func TestHydrateContinuesTheSequence(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 3, 4096)
	o.append(80)
	o.seal()
	ids := o.publish()
	o.append(7) // unsealed, shipped as tail objects
	o.ship()
	maxBucketID := slices.Max(ids)

	dir, rep := mustHydrate(t, b, 3, coldload.Options{})
	noLeftovers(t, dir)
	if rep.LastSeq != 87 || rep.TailRecords != 7 {
		t.Fatalf("report %+v: want last sequence 87 with 7 tail records", rep)
	}
	st := openRW(t, dir)
	sameRecords(t, allRecords(t, st), o.records())
	res, err := st.Append(event(3, 88))
	if err != nil {
		t.Fatalf("append after hydrate: %v", err)
	}
	if res.Seq != 88 {
		t.Fatalf("append after hydrate got sequence %d, want 88", res.Seq)
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	active := snap.Segments[len(snap.Segments)-1]
	if active.ID <= maxBucketID || active.ID != rep.NextSegment {
		t.Fatalf("active segment %d, next %d: must be above every bucket id (max %d)", active.ID, rep.NextSegment, maxBucketID)
	}
	for _, s := range snap.Segments[:len(snap.Segments)-1] {
		if !s.Sealed {
			t.Fatalf("downloaded segment %d is not sealed", s.ID)
		}
	}
	// The new owner's next sealed segment uploads under a fresh key.
	if _, err := st.Seal(); err != nil {
		t.Fatal(err)
	}
	data, err := st.ReadSegment(active.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(context.Background(), blobtier.SegmentKey(3, active.ID), data, 0); err != nil {
		t.Fatalf("the new owner's first upload met an existing object: %v", err)
	}
}

// CHECKLIST §3.5, the part that is coldload's: a restore never writes over a
// store, never into another shard's directory, and a non-owner's cold load
// cannot write at all (the ownership decision itself is the engine's).
func TestHydrateRefusesWhatItMustNotTouch(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 2, 4096)
	o.append(10)
	o.seal()
	o.publish()

	t.Run("non-empty directory", func(t *testing.T) {
		dir := target(t, 2)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		keep := filepath.Join(dir, "seg-0000000000000001.eslog")
		if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := coldload.Hydrate(ctxT(t), b, 2, dir, coldload.Options{})
		mustErrIs(t, err, coldload.ErrNotEmpty)
		if got, _ := os.ReadFile(keep); string(got) != "mine" {
			t.Fatalf("the existing file changed: %q", got)
		}
	})
	t.Run("another shard's directory", func(t *testing.T) {
		dir := localseg.ShardDir(t.TempDir(), 1)
		_, err := coldload.Hydrate(ctxT(t), b, 2, dir, coldload.Options{})
		mustErrIs(t, err, coldload.ErrWrongShard)
		absentOrEmpty(t, dir)
	})
	t.Run("a store that never started (only its LOCK) is replaced", func(t *testing.T) {
		// A crash or a full disk between the writer lock and the first
		// segment leaves only LOCK: that directory must not block every
		// later hydration of the shard.
		dir := target(t, 2)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := coldload.Hydrate(ctxT(t), b, 2, dir, coldload.Options{}); err != nil {
			t.Fatalf("hydrate over an unstarted store: %v", err)
		}
		sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
	})
	t.Run("a store being created by a live writer is refused", func(t *testing.T) {
		dir := target(t, 2)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		held, err := localseg.OSFS{}.Lock(filepath.Join(dir, "LOCK"))
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		_, err = coldload.Hydrate(ctxT(t), b, 2, dir, coldload.Options{})
		mustErrIs(t, err, localseg.ErrLocked)
		if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "LOCK" {
			t.Fatalf("the live writer's directory changed: %v", ents)
		}
	})
	t.Run("LOCK beside anything else is still not empty", func(t *testing.T) {
		dir := target(t, 2)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"LOCK", "checkpoint.json"} {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := coldload.Hydrate(ctxT(t), b, 2, dir, coldload.Options{})
		mustErrIs(t, err, coldload.ErrNotEmpty)
		if ents, _ := os.ReadDir(dir); len(ents) != 2 {
			t.Fatalf("the directory changed: %v", ents)
		}
	})
	t.Run("an empty directory is fine", func(t *testing.T) {
		dir := target(t, 2)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := coldload.Hydrate(ctxT(t), b, 2, dir, coldload.Options{}); err != nil {
			t.Fatalf("hydrate into an empty directory: %v", err)
		}
		sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
	})
	t.Run("a cold load is read-only and writes nothing to the bucket", func(t *testing.T) {
		wc := &writeCounter{Bucket: b}
		scratch := t.TempDir()
		st, cleanup, err := coldload.ReadOnly(ctxT(t), wc, 2, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(event(2, 99)); !errors.Is(err, localseg.ErrReadOnly) {
			t.Fatalf("append on a cold load: %v, want ErrReadOnly", err)
		}
		if _, err := st.Pull("c", 10); err == nil {
			t.Fatalf("a pull (which may create a consumer) succeeded on a cold load")
		}
		cleanup()
		cleanup() // twice is fine
		if n := wc.writes.Load(); n != 0 {
			t.Fatalf("a cold load made %d write requests", n)
		}
		ents, err := os.ReadDir(scratch)
		if err != nil || len(ents) != 0 {
			t.Fatalf("cleanup left %v in the scratch root (err %v)", ents, err)
		}
	})
	t.Run("a second restore of the same target is refused while one runs", func(t *testing.T) {
		dir := target(t, 2)
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		lock, err := localseg.OSFS{}.Lock(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".hydrate.lock"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = coldload.Hydrate(ctxT(t), b, 2, dir, coldload.Options{})
		lock.Close()
		mustErrIs(t, err, localseg.ErrLocked)
		absentOrEmpty(t, dir)
	})
}

// CHECKLIST §3.6: a shard absent from the bucket reads as empty for a
// non-owner; a restore fails unless AllowEmpty (a wrong prefix must not look
// like an empty log).
func TestAbsentShard(t *testing.T) {
	b, raw := memBucket(t)
	o := newOwner(t, b, 0, 4096)
	o.append(10)
	o.seal()
	o.publish()

	st, cleanup, err := coldload.ReadOnly(ctxT(t), b, 5, "")
	if err != nil {
		t.Fatalf("cold load of an absent shard: %v", err)
	}
	p, err := st.Scan(0, 10)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if p.Exists || len(p.Records) != 0 || st.Tip() != 0 {
		t.Fatalf("absent shard reads %+v, tip %d", p, st.Tip())
	}
	cleanup()

	dir := target(t, 5)
	_, err = coldload.Hydrate(ctxT(t), b, 5, dir, coldload.Options{})
	mustErrIs(t, err, coldload.ErrEmpty)
	absentOrEmpty(t, dir)
	noLeftovers(t, dir)

	dir, rep := mustHydrate(t, b, 5, coldload.Options{AllowEmpty: true})
	if !rep.Empty || rep.LastSeq != 0 {
		t.Fatalf("report %+v, want empty", rep)
	}
	if got := openRO(t, dir).Tip(); got != 0 {
		t.Fatalf("empty restore has tip %d", got)
	}

	// The same shard behind a wrong prefix: nothing there, so refused.
	wrong := blobtier.New(blob.PrefixedBucket(raw, "wrong/"), blobtier.Options{})
	defer wrong.Close()
	_, err = coldload.Hydrate(ctxT(t), wrong, 0, target(t, 0), coldload.Options{})
	mustErrIs(t, err, coldload.ErrEmpty)
}

// CHECKLIST §3.7: many segments across rollovers publish and cold-load
// intact, read in parallel within the concurrency bound, with progress.
func TestManySegmentsColdLoadIntact(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 1, 2048)
	o.append(1500)
	o.seal()
	ids := o.publish()
	if len(ids) < 50 {
		t.Fatalf("want many segments, got %d", len(ids))
	}
	// Every read blocks until four are in flight (the bound), then for a
	// moment longer: a restore that ignored its bound would have more reads
	// enter meanwhile. The test cannot pass by being slow: a fifth read
	// would only ever add to the peak.
	rec := &recorder{Reader: b}
	holdUntilInFlight(rec, 4)
	var progress []coldload.Progress
	dir, rep := mustHydrate(t, rec, 1, coldload.Options{Concurrency: 4, Progress: func(p coldload.Progress) {
		progress = append(progress, p)
	}})
	sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
	gapless(t, allRecords(t, openRO(t, dir)), 1)
	if rep.Segments != len(ids) || rep.Objects != len(ids) || rep.Bytes != rep.SegmentBytes {
		t.Fatalf("report %+v: want %d segments, each read once", rep, len(ids))
	}
	if p := rec.peak.Load(); p != 4 {
		t.Fatalf("peak reads in flight %d, want the bound, 4", p)
	}
	got := segmentFiles(t, dir)
	if len(got) != len(ids)+1 || !slices.Equal(got[:len(ids)], ids) {
		t.Fatalf("segment files %v, want %v plus the next one", got, ids)
	}
	last := progress[len(progress)-1]
	if last.Objects != len(ids) || last.ObjectsTotal != len(ids) || last.Bytes != rep.SegmentBytes || last.BytesTotal != rep.SegmentBytes {
		t.Fatalf("last progress %+v, want %d objects and %d bytes", last, len(ids), rep.SegmentBytes)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].Objects < progress[i-1].Objects {
			t.Fatalf("progress went backward: %+v after %+v", progress[i], progress[i-1])
		}
	}
}

// CHECKLIST §3.10: after a reclaim the base offset holds and new segment ids
// start above every id the bucket has seen (orphans below the watermark are
// skipped, never read).
func TestHydrateAfterReclaimKeepsBaseAndIDs(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 2048)
	o.append(200)
	o.seal()
	ids := o.publish()
	if len(ids) < 6 {
		t.Fatalf("want at least 6 segments, got %d", len(ids))
	}
	// A consumer reads through the fourth segment; the owner reclaims
	// through it: watermark first, then local, then bucket deletes — which
	// "crash" after deleting only some objects, leaving orphans.
	through := o.sealed()[3]
	if _, err := o.st.Pull("reader", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := o.st.Ack("reader", through.LastSeq); err != nil {
		t.Fatal(err)
	}
	putWatermark(t, b, 0, through.LastSeq, through.ID)
	if _, err := o.st.Reclaim(through.ID); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	for _, id := range ids[:2] {
		if err := b.Delete(context.Background(), blobtier.SegmentKey(0, id)); err != nil {
			t.Fatal(err)
		}
	}
	o.rep.Advance(200) // the sealed segments are durable: ship only what follows
	o.append(5)
	o.ship()

	rec := &recorder{Reader: b}
	dir, rep := mustHydrate(t, rec, 0, coldload.Options{})
	if rep.Base != through.LastSeq || rep.BaseSegment != through.ID || rep.OrphanSegments != 2 {
		t.Fatalf("report %+v: want base %d/%d with 2 orphans", rep, through.LastSeq, through.ID)
	}
	for _, k := range rec.got() {
		if pk, err := blobtier.ParseKey(k); err == nil && pk.Kind == blobtier.KindSegment && pk.Segment <= through.ID {
			t.Fatalf("read %s at or below the watermark", k)
		}
	}
	m, err := localseg.ReadReclaimManifest(localseg.OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.ReclaimedThroughSeq != through.LastSeq || m.ReclaimedThroughSegment != through.ID {
		t.Fatalf("reclaim.json %+v, want %d/%d", m, through.LastSeq, through.ID)
	}
	st := openRW(t, dir)
	p, err := st.Scan(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Clamped || p.Base != through.LastSeq+1 || p.Records[0].Seq != through.LastSeq+1 {
		t.Fatalf("scan from 0: %+v, want clamped to base %d", p, through.LastSeq+1)
	}
	sameRecords(t, allRecords(t, st), o.records())
	if _, err := st.Get(through.LastSeq); !errors.Is(err, localseg.ErrReclaimed) {
		t.Fatalf("get of a reclaimed sequence: %v, want ErrReclaimed", err)
	}
	res, err := st.Append(event(0, 999))
	if err != nil || res.Seq != 206 {
		t.Fatalf("append after hydrate: %+v %v, want sequence 206", res, err)
	}
	snap, _ := st.Snapshot()
	if snap.Segments[0].ID != through.ID+1 {
		t.Fatalf("first segment %d, want %d", snap.Segments[0].ID, through.ID+1)
	}
	if active := snap.Segments[len(snap.Segments)-1].ID; active <= slices.Max(ids) {
		t.Fatalf("active segment %d is not above every bucket id (max %d)", active, slices.Max(ids))
	}
	if _, ok := snap.Consumers["reader"]; !ok {
		t.Fatalf("consumer lost: %+v", snap.Consumers)
	}
}

// Everything reclaimed and every tail object cleaned up: only the
// watermark and the cursor object are left (the cursor object vouches for
// the watermark; without it see TestWatermarkSupportedByTheObjects). The
// restore is an empty store at the base.
func TestHydrateWatermarkOnly(t *testing.T) {
	b, _ := memBucket(t)
	putWatermark(t, b, 4, 500, 9)
	putCursor(t, b, 4, tailbatch.Cursor{V: 2, ShippedThrough: 500})
	dir, rep := mustHydrate(t, b, 4, coldload.Options{})
	if rep.Empty || rep.NextSegment != 10 || rep.LastSeq != 0 {
		t.Fatalf("report %+v", rep)
	}
	st := openRW(t, dir)
	if st.Tip() != 500 {
		t.Fatalf("tip %d, want 500", st.Tip())
	}
	res, err := st.Append(event(4, 1))
	if err != nil || res.Seq != 501 {
		t.Fatalf("append: %+v %v, want 501", res, err)
	}
}

// CHECKLIST §3.14: a restore stops at a gap and names the missing range;
// AllowPartial keeps the prefix (and the next segment id stays above the
// ids beyond the gap).
func TestGapIsNamedAndAllowPartialKeepsThePrefix(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 2048)
	o.append(150)
	o.seal()
	ids := o.publish()
	segs := o.sealed()
	if len(segs) < 5 {
		t.Fatalf("want 5 segments, got %d", len(segs))
	}
	// Segments 3 and 4 (1-based ids ids[2], ids[3]) vanish.
	for _, id := range ids[2:4] {
		if err := b.Delete(context.Background(), blobtier.SegmentKey(0, id)); err != nil {
			t.Fatal(err)
		}
	}
	dir := target(t, 0)
	_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
	mustErrIs(t, err, coldload.ErrGap)
	var g *coldload.GapError
	if !errors.As(err, &g) {
		t.Fatalf("error %v is not a *GapError", err)
	}
	want := coldload.GapError{Shard: 0, FromSegment: ids[2], ToSegment: ids[3],
		FromSeq: segs[2].FirstSeq, ToSeq: segs[3].LastSeq,
		After: blobtier.SegmentKey(0, ids[1]), Before: blobtier.SegmentKey(0, ids[4])}
	if *g != want {
		t.Fatalf("gap %+v, want %+v", *g, want)
	}
	absentOrEmpty(t, dir)
	noLeftovers(t, dir)

	dir, rep := mustHydrate(t, b, 0, coldload.Options{AllowPartial: true})
	if len(rep.Gaps) != 1 || *rep.Gaps[0] != want {
		t.Fatalf("report gaps %+v, want %+v", rep.Gaps, want)
	}
	if rep.LastSeq != segs[1].LastSeq || rep.Segments != 2 {
		t.Fatalf("report %+v: want the prefix through %d", rep, segs[1].LastSeq)
	}
	if rep.NextSegment != slices.Max(ids)+1 {
		t.Fatalf("next segment %d, want %d (above the ids beyond the gap)", rep.NextSegment, slices.Max(ids)+1)
	}
	// localseg wants consecutive ids on disk: the ids between the prefix
	// and the next segment are empty fillers, claiming no sequence.
	got := segmentFiles(t, dir)
	if len(got) != int(rep.NextSegment) || got[0] != 1 || got[len(got)-1] != rep.NextSegment {
		t.Fatalf("segment files %v: want 1..%d", got, rep.NextSegment)
	}
	if rep.FillerSegments != int(rep.NextSegment-ids[1]-1) {
		t.Fatalf("report %+v: want %d fillers", rep, rep.NextSegment-ids[1]-1)
	}
	for _, id := range got[2 : len(got)-1] {
		if fi, err := os.Stat(filepath.Join(dir, localseg.SegmentFileName(id))); err != nil || fi.Size() != 0 {
			t.Fatalf("segment %d beyond the prefix: %v, %v; want an empty filler", id, fi, err)
		}
	}
	st := openRW(t, dir)
	sameRecords(t, allRecords(t, st), o.records()[:segs[1].LastSeq])
	res, err := st.Append(event(0, 1000))
	if err != nil || res.Seq != segs[1].LastSeq+1 {
		t.Fatalf("append after a partial restore: %+v %v", res, err)
	}
}

// A hole in the sequences between segments with consecutive ids, and one
// between tail objects, are gaps too.
func TestSequenceGaps(t *testing.T) {
	t.Run("between segments", func(t *testing.T) {
		b, _ := memBucket(t)
		put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 3, plain)...))
		put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(6, 8, plain)...))
		_, err := coldload.Hydrate(ctxT(t), b, 0, target(t, 0), coldload.Options{})
		var g *coldload.GapError
		if !errors.As(err, &g) || g.FromSegment != 0 || g.FromSeq != 4 || g.ToSeq != 5 {
			t.Fatalf("error %v, want a gap of sequences 4..5", err)
		}
		mustContain(t, err, "4..5", blobtier.SegmentKey(0, 2))
		dir, rep := mustHydrate(t, b, 0, coldload.Options{AllowPartial: true})
		if rep.LastSeq != 3 || rep.NextSegment != 3 {
			t.Fatalf("report %+v", rep)
		}
		if got := segmentFiles(t, dir); !slices.Equal(got, []uint64{1, 2, 3}) || rep.FillerSegments != 1 {
			t.Fatalf("segment files %v (report %+v), want [1 2 3] with 2 an empty filler", got, rep)
		}
		if fi, err := os.Stat(filepath.Join(dir, localseg.SegmentFileName(2))); err != nil || fi.Size() != 0 {
			t.Fatalf("segment 2 beyond the prefix: %v %v, want an empty filler", fi, err)
		}
	})
	t.Run("between tail objects", func(t *testing.T) {
		b, _ := memBucket(t)
		put(t, b, blobtier.TailKey(0, 1, 3), frames(t, evFrames(1, 3, plain)...))
		put(t, b, blobtier.TailKey(0, 6, 8), frames(t, evFrames(6, 8, plain)...))
		_, err := coldload.Hydrate(ctxT(t), b, 0, target(t, 0), coldload.Options{})
		var g *coldload.GapError
		if !errors.As(err, &g) || g.FromSeq != 4 || g.ToSeq != 5 || g.Before != blobtier.TailKey(0, 6, 8) {
			t.Fatalf("error %v, want a gap of sequences 4..5 before the second object", err)
		}
		dir, rep := mustHydrate(t, b, 0, coldload.Options{AllowPartial: true})
		if rep.LastSeq != 3 || rep.TailObjects != 1 || len(rep.Gaps) != 1 {
			t.Fatalf("report %+v", rep)
		}
		gapless(t, allRecords(t, openRO(t, dir)), 1)
	})
	t.Run("a missing segment covered by tail objects", func(t *testing.T) {
		b, _ := memBucket(t)
		put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 3, plain)...))
		put(t, b, blobtier.SegmentKey(0, 3), frames(t, evFrames(7, 9, plain)...))
		put(t, b, blobtier.TailKey(0, 4, 6), frames(t, evFrames(4, 6, plain)...))
		put(t, b, blobtier.TailKey(0, 7, 9), frames(t, evFrames(7, 9, plain)...))
		_, err := coldload.Hydrate(ctxT(t), b, 0, target(t, 0), coldload.Options{})
		var g *coldload.GapError
		if !errors.As(err, &g) || g.FromSegment != 2 || g.ToSegment != 2 || g.FromSeq != 4 || g.ToSeq != 6 || !g.CoveredByTail {
			t.Fatalf("error %v, want segment 2 (sequences 4..6) missing, covered by tail objects", err)
		}
		dir, rep := mustHydrate(t, b, 0, coldload.Options{AllowPartial: true})
		if rep.LastSeq != 9 || rep.TailRecords != 6 || rep.NextSegment != 4 {
			t.Fatalf("report %+v", rep)
		}
		gapless(t, allRecords(t, openRO(t, dir)), 1)
	})
}

// CHECKLIST §4.1 (RED control): with no tail objects, a cold load from the
// bucket alone loses exactly the unsealed events. §4.2: with them, all
// survive a destroyed local disk.
func TestTailReplicationRedControlAndRecovery(t *testing.T) {
	const sealedEvents, unsealed = 60, 21
	build := func(t *testing.T, ship bool) (blobtier.Bucket, []localseg.Record) {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 4096)
		o.append(sealedEvents)
		o.seal()
		o.publish()
		o.append(unsealed)
		if ship {
			o.ship()
		}
		recs := o.records()
		// The local disk is destroyed: only the bucket remains.
		o.st.Close()
		return b, recs
	}
	t.Run("RED without tail objects", func(t *testing.T) {
		b, want := build(t, false)
		st, rep, cleanup, err := coldload.ReadOnlyWith(ctxT(t), b, 0, "", coldload.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cleanup()
		got := allRecords(t, st)
		if lost := len(want) - len(got); lost != unsealed {
			t.Fatalf("lost %d events, want exactly the %d unsealed ones", lost, unsealed)
		}
		sameRecords(t, got, want[:sealedEvents])
		if rep.TailObjects != 0 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("with tail objects", func(t *testing.T) {
		b, want := build(t, true)
		dir, rep := mustHydrate(t, b, 0, coldload.Options{})
		sameRecords(t, allRecords(t, openRO(t, dir)), want)
		if rep.TailRecords != unsealed || rep.TailObjects == 0 || rep.ShippedThrough != sealedEvents+unsealed {
			t.Fatalf("report %+v", rep)
		}
	})
}

// CHECKLIST §4.4: an event present in both a tail object and a sealed
// segment, or in two tail objects, is recovered exactly once; the superseded
// objects are counted.
func TestOverlapRecoveredOnce(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 1<<20)
	o.append(10)
	o.ship() // tail object 1..10
	o.append(5)
	o.ship() // tail object 11..15
	o.seal()
	o.publish() // the segment now holds 1..15: both tail objects are superseded
	o.append(4)
	o.ship() // tail object 16..19
	// A re-ship after a lost acknowledgement: a wider object starting at
	// 16, holding the same frames plus more.
	o.append(3)
	ext, ok, err := o.st.TailExtent(15, 1<<20)
	if err != nil || !ok || ext.FirstSeq != 16 || ext.LastSeq != 22 {
		t.Fatalf("extent %+v %v %v", ext, ok, err)
	}
	data, err := o.st.ReadRange(ext.Segment, ext.Start, ext.End-ext.Start)
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, blobtier.TailKey(0, 16, 22), data)

	dir, rep := mustHydrate(t, b, 0, coldload.Options{})
	got := allRecords(t, openRO(t, dir))
	sameRecords(t, got, o.records())
	gapless(t, got, 1)
	if rep.TailSuperseded != 3 || rep.TailObjects != 1 || rep.TailRecords != 7 {
		t.Fatalf("report %+v: want 3 superseded objects, 1 used with 7 records", rep)
	}
}

// CHECKLIST §3.12 (second half): two objects with different bytes for one
// sequence fail a restore naming both keys: between two tail objects, and
// between a segment and a tail object.
func TestConflictingObjectsNameBothKeys(t *testing.T) {
	other := func(seq uint64) string {
		if seq == 5 {
			return "written by someone else"
		}
		return plain(seq)
	}
	cases := []struct {
		name       string
		objects    map[string][]byte
		key, other string
	}{
		{
			name: "two tail objects",
			objects: map[string][]byte{
				blobtier.TailKey(0, 1, 6): frames(t, evFrames(1, 6, plain)...),
				blobtier.TailKey(0, 4, 9): frames(t, evFrames(4, 9, other)...),
			},
			key: blobtier.TailKey(0, 1, 6), other: blobtier.TailKey(0, 4, 9),
		},
		{
			name: "a segment and a tail object",
			objects: map[string][]byte{
				blobtier.SegmentKey(0, 1): frames(t, evFrames(1, 6, plain)...),
				blobtier.TailKey(0, 5, 5): frames(t, evFrames(5, 5, other)...),
			},
			key: blobtier.SegmentKey(0, 1), other: blobtier.TailKey(0, 5, 5),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := memBucket(t)
			for k, v := range tc.objects {
				put(t, b, k, v)
			}
			dir := target(t, 0)
			_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{AllowPartial: true})
			mustErrIs(t, err, coldload.ErrConflict)
			var c *coldload.ConflictError
			if !errors.As(err, &c) || c.Seq != 5 || c.Key != tc.key || c.OtherKey != tc.other {
				t.Fatalf("error %v, want a conflict at 5 between %s and %s", err, tc.key, tc.other)
			}
			mustContain(t, err, tc.key, tc.other)
			absentOrEmpty(t, dir)
		})
	}
	// The same objects with identical bytes restore fine: the comparison,
	// not the overlap, is what fails.
	b, _ := memBucket(t)
	put(t, b, blobtier.SegmentKey(0, 1), frames(t, evFrames(1, 6, plain)...))
	put(t, b, blobtier.TailKey(0, 5, 5), frames(t, evFrames(5, 5, plain)...))
	put(t, b, blobtier.TailKey(0, 4, 9), frames(t, evFrames(4, 9, plain)...))
	_, rep := mustHydrate(t, b, 0, coldload.Options{})
	if rep.LastSeq != 9 || rep.TailSuperseded != 1 || rep.TailObjects != 1 {
		t.Fatalf("report %+v", rep)
	}
}

// CHECKLIST §4.8: objects under another shard's keys, another prefix's keys
// and keys that do not parse are never read by a shard's recovery.
func TestForeignObjectsAreNeverRead(t *testing.T) {
	raw := memblob.OpenBucket(nil)
	liar := func(seq uint64) string { return "decoy" }
	// Another prefix, this shard's very keys, different bytes (valid
	// objects: metadata and all).
	for k, v := range map[string][]byte{
		blobtier.SegmentKey(0, 1):   frames(t, evFrames(1, 30, liar)...),
		blobtier.TailKey(0, 31, 40): frames(t, evFrames(31, 40, liar)...),
	} {
		putRaw(t, raw, "staging/"+k, v, blobtier.MetaOf(v, 0).Encode())
	}
	// Keys in this shard's key spaces that do not parse.
	junk := []string{
		blobtier.ListPrefix(0, blobtier.KindTail) + "zz",
		blobtier.ListPrefix(0, blobtier.KindSegment) + "not-a-segment",
	}
	for _, k := range junk {
		putRaw(t, raw, "prod/"+k, []byte("junk"), nil)
	}
	mine := blobtier.New(blob.PrefixedBucket(raw, "prod/"), blobtier.Options{})
	defer mine.Close()

	o := newOwner(t, mine, 0, 4096)
	o.append(30)
	o.seal()
	o.publish()
	o.append(4)
	o.ship()

	// Another shard, same sequences, different bytes.
	put(t, mine, blobtier.SegmentKey(1, 1), frames(t, evFrames(1, 30, liar)...))
	put(t, mine, blobtier.TailKey(1, 31, 40), frames(t, evFrames(31, 40, liar)...))

	rec := &recorder{Reader: mine}
	dir, rep := mustHydrate(t, rec, 0, coldload.Options{})
	sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
	for _, k := range rec.got() {
		pk, err := blobtier.ParseKey(k)
		if err != nil || pk.Shard != 0 {
			t.Fatalf("read %s, which is not this shard's", k)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(rep.Unparsed)), slices.Sorted(slices.Values(junk))) {
		t.Fatalf("unparsed %v, want %v", rep.Unparsed, junk)
	}
}

// CHECKLIST §4.12: a cursor object pointing past what the bucket holds is
// clamped and reported; shipped_through beyond what was restored fails
// unless AllowPartial.
func TestCursorObjectIsClamped(t *testing.T) {
	newBucketWith := func(t *testing.T, c tailbatch.Cursor) blobtier.Bucket {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 4096)
		o.append(20)
		o.seal()
		o.publish()
		putCursor(t, b, 0, c)
		return b
	}
	t.Run("consumers beyond the tip", func(t *testing.T) {
		b := newBucketWith(t, tailbatch.Cursor{V: 3, ShippedThrough: 20, Consumers: map[string]uint64{"ahead": 35, "behind": 7, "fresh": 0}})
		dir, rep := mustHydrate(t, b, 0, coldload.Options{})
		want := []coldload.ClampedCursor{{Consumer: "ahead", Cursor: 35, ClampedTo: 20}}
		if !slices.Equal(rep.ClampedCursors, want) || rep.Consumers != 3 {
			t.Fatalf("report %+v, want clamped %+v", rep, want)
		}
		snap, err := openRO(t, dir).Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Consumers; len(got) != 3 || got["ahead"] != 20 || got["behind"] != 7 || got["fresh"] != 0 {
			t.Fatalf("consumers %+v", got)
		}
	})
	t.Run("a stale cursor never moves a consumer backward", func(t *testing.T) {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 4096)
		o.append(20)
		if _, err := o.st.Pull("c", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := o.st.Ack("c", 15); err != nil {
			t.Fatal(err)
		}
		o.seal()
		o.publish()
		putCursor(t, b, 0, tailbatch.Cursor{V: 2, ShippedThrough: 20, Consumers: map[string]uint64{"c": 10}})
		dir, _ := mustHydrate(t, b, 0, coldload.Options{})
		snap, err := openRO(t, dir).Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if snap.Consumers["c"] != 15 {
			t.Fatalf("consumer c at %d, want 15 (the segments' ack, above the stale cursor object)", snap.Consumers["c"])
		}
	})
	t.Run("shipped_through beyond the bucket", func(t *testing.T) {
		b := newBucketWith(t, tailbatch.Cursor{V: 3, ShippedThrough: 26, Consumers: map[string]uint64{"c": 26}})
		dir := target(t, 0)
		_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
		mustErrIs(t, err, coldload.ErrShort)
		var s *coldload.ShortError
		if !errors.As(err, &s) || s.Reached != 20 || s.ShippedThrough != 26 {
			t.Fatalf("error %v", err)
		}
		absentOrEmpty(t, dir)
		dir, rep := mustHydrate(t, b, 0, coldload.Options{AllowPartial: true})
		if rep.Short == nil || rep.Short.Reached != 20 || len(rep.ClampedCursors) != 1 {
			t.Fatalf("report %+v", rep)
		}
		snap, _ := openRO(t, dir).Snapshot()
		if snap.Consumers["c"] != 20 {
			t.Fatalf("consumer c at %d, want 20", snap.Consumers["c"])
		}
	})
}

// A corrupt object at rest — a flipped byte, a truncation, an extension,
// all under the original metadata — makes the restore fail naming the key,
// for segment and tail objects alike; never a shortened replay.
func TestCorruptObjectsAtRestFailNamingTheKey(t *testing.T) {
	corruptions := []struct {
		name string
		f    func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-5] }},
		{"extended", func(b []byte) []byte { return append(b, 0, 0, 0, 0) }},
	}
	for _, kind := range []string{"segment", "tail"} {
		for _, c := range corruptions {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				b, raw := memBucket(t)
				o := newOwner(t, b, 0, 2048)
				o.append(60)
				o.seal()
				ids := o.publish()
				o.append(5)
				o.ship()
				var key string
				if kind == "segment" {
					key = blobtier.SegmentKey(0, ids[len(ids)/2])
				} else {
					tails := listed(t, b, 0, blobtier.KindTail)
					key = tails[len(tails)-1].Key // the one beyond the segments
				}
				rewriteAtRest(t, raw, key, c.f)
				dir := target(t, 0)
				_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{AllowPartial: true})
				mustErrIs(t, err, coldload.ErrCorrupt, blobtier.ErrCorrupt)
				mustContain(t, err, key)
				absentOrEmpty(t, dir)
				noLeftovers(t, dir)
			})
		}
	}
}

// The second layer: an object whose digest matches its bytes but whose
// frames do not verify (a bad CRC, a torn frame, a key that lies about its
// sequences) fails naming the key.
func TestFrameLevelCorruptionFailsNamingTheKey(t *testing.T) {
	good := frames(t, evFrames(1, 4, plain)...)
	badCRC := slices.Clone(good)
	badCRC[len(badCRC)-3] ^= 1 // inside the last body: the CRC no longer matches
	// A payload changed under its CRC, the body still valid JSON with the
	// right sequence: only the CRC catches it.
	onlyCRC := bytes.Replace(good, []byte(`"payload":"p2"`), []byte(`"payload":"q2"`), 1)
	if bytes.Equal(onlyCRC, good) {
		t.Fatal("no payload p2 to change")
	}
	cases := []struct {
		name string
		key  string
		data []byte
	}{
		{"segment with a bad CRC", blobtier.SegmentKey(0, 1), badCRC},
		{"segment with a torn last frame", blobtier.SegmentKey(0, 1), good[:len(good)-7]},
		{"segment whose payload changed under its CRC", blobtier.SegmentKey(0, 1), onlyCRC},
		{"segment ending in 5 bytes of a header", blobtier.SegmentKey(0, 1), append(slices.Clone(good), good[:5]...)},
		{"tail with a bad CRC", blobtier.TailKey(0, 1, 4), badCRC},
		{"tail whose key overstates it", blobtier.TailKey(0, 1, 5), good},
		{"tail whose key understates it", blobtier.TailKey(0, 1, 3), good},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := memBucket(t)
			put(t, b, tc.key, tc.data)
			_, err := coldload.Hydrate(ctxT(t), b, 0, target(t, 0), coldload.Options{AllowPartial: true})
			mustErrIs(t, err, coldload.ErrCorrupt, localseg.ErrCorrupt)
			mustContain(t, err, tc.key)
			var oe *coldload.ObjectError
			if !errors.As(err, &oe) || oe.Key != tc.key {
				t.Fatalf("error %v does not carry the key %s", err, tc.key)
			}
		})
	}
}

// A restore that failed or crashed leaves no half-hydrated store under the
// target's name; a rerun removes the leftover and succeeds.
func TestFailedRestoreLeavesNothingAndRerunSucceeds(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 2048)
	o.append(100)
	o.seal()
	ids := o.publish()
	o.append(3)
	o.ship()

	dir := target(t, 0)
	boom := errors.New("network went away")
	rec := &recorder{Reader: b, fail: func(key string) error {
		if key == blobtier.SegmentKey(0, ids[len(ids)-1]) {
			return boom
		}
		return nil
	}}
	_, err := coldload.Hydrate(ctxT(t), rec, 0, dir, coldload.Options{})
	mustErrIs(t, err, boom)
	absentOrEmpty(t, dir)
	noLeftovers(t, dir)

	// A crashed restore's leftover: junk the rerun must never trust.
	tmp := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".hydrating")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		localseg.SegmentFileName(1):  "garbage",
		localseg.SegmentFileName(77): "garbage",
		"reclaim.json":               `{"reclaimed_through_seq":50,"reclaimed_through_segment":3}`,
	} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{}); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	noLeftovers(t, dir)
	sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
}

// A live owner reclaims between the restore's listing and its reads: the
// restore notices the bucket changed and starts over from the new
// watermark instead of failing.
func TestRestoreStartsOverWhenTheOwnerReclaimsMeanwhile(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 2048)
	o.append(120)
	o.seal()
	ids := o.publish()
	segs := o.sealed()
	var done bool
	rec := &recorder{Reader: b}
	rec.fail = func(key string) error {
		if done || key != blobtier.SegmentKey(0, ids[0]) {
			return nil
		}
		// The owner commits a watermark through segment 2 and deletes
		// segments 1 and 2, just before this read.
		done = true
		putWatermark(t, b, 0, segs[1].LastSeq, segs[1].ID)
		for _, id := range ids[:2] {
			if err := b.Delete(context.Background(), blobtier.SegmentKey(0, id)); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	dir, rep := mustHydrate(t, rec, 0, coldload.Options{Concurrency: 1})
	if rep.Attempts != 2 || rep.Base != segs[1].LastSeq {
		t.Fatalf("report %+v: want a second attempt from base %d", rep, segs[1].LastSeq)
	}
	sameRecords(t, allRecords(t, openRO(t, dir)), o.records()[segs[1].LastSeq:])
}

func TestHydrateBadArguments(t *testing.T) {
	b, _ := memBucket(t)
	if _, err := coldload.Hydrate(ctxT(t), b, 0, "", coldload.Options{}); err == nil {
		t.Fatal("an empty target was accepted")
	}
	file := filepath.Join(t.TempDir(), "shard-0000")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := coldload.Hydrate(ctxT(t), b, 0, file, coldload.Options{AllowEmpty: true}); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("a file as target: %v", err)
	}
}

// A process crash at every write-class filesystem operation of a restore
// (the operation and everything after it fail, as when the process dies
// there) never leaves a half-hydrated store under the target's name: the
// target is absent, or it is the complete store (the crash came after the
// rename). A rerun then either restores from scratch or refuses the
// complete store as non-empty.
func TestProcessCrashAtEveryWriteNeverLeavesAHalfStore(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 2048)
	o.append(40)
	if _, err := o.st.Pull("c", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := o.st.Ack("c", 30); err != nil {
		t.Fatal(err)
	}
	o.seal()
	o.publish()
	o.append(5)
	o.ship()
	want := o.records()

	var k int64
	sawComplete := false
	for ; ; k++ {
		dir := target(t, 0)
		crash := faultfs.CrashAt(k)
		fsys := faultfs.Wrap(localseg.OSFS{}, crash)
		_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{Concurrency: 1, Store: localseg.Options{FS: fsys}})
		at, crashed := crash.Crashed()
		if !crashed {
			if err != nil {
				t.Fatalf("restore without a crash: %v", err)
			}
			sameRecords(t, allRecords(t, openRO(t, dir)), want)
			break
		}
		if err == nil {
			t.Fatalf("crash at %v (point %d) but the restore reported success", at, k)
		}
		complete := false
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			complete, sawComplete = true, true
			sameRecords(t, allRecords(t, openRO(t, dir)), want)
		}
		_, err = coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
		if complete {
			mustErrIs(t, err, coldload.ErrNotEmpty)
		} else if err != nil {
			t.Fatalf("rerun after a crash at %v (point %d): %v", at, k, err)
		}
		noLeftovers(t, dir)
		st := openRO(t, dir)
		sameRecords(t, allRecords(t, st), want)
		if snap, err := st.Snapshot(); err != nil || snap.Consumers["c"] != 30 {
			t.Fatalf("after a crash at %v: consumers %+v (%v)", at, snap.Consumers, err)
		}
	}
	if k < 20 || !sawComplete {
		t.Fatalf("%d crash points, a crash after the rename seen: %v; the sweep did not exercise the restore", k, sawComplete)
	}
	t.Logf("%d crash points", k)
}

// Tail objects are read ahead in parallel within the bound and applied in
// order: many small objects restore intact with at most Concurrency reads
// (and so at most Concurrency objects held) at once.
func TestManyTailObjectsReadWithinTheBound(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 1<<20)
	for range 30 {
		o.append(3)
		o.ship()
	}
	if n := len(listed(t, b, 0, blobtier.KindTail)); n != 30 {
		t.Fatalf("%d tail objects, want 30", n)
	}
	rec := &recorder{Reader: b}
	holdUntilInFlight(rec, 3)
	dir, rep := mustHydrate(t, rec, 0, coldload.Options{Concurrency: 3})
	sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
	if rep.TailObjects != 30 || rep.TailRecords != 90 {
		t.Fatalf("report %+v", rep)
	}
	if p := rec.peak.Load(); p != 3 {
		t.Fatalf("peak reads in flight %d, want the bound, 3", p)
	}
}

// Recovered tail frames go through the store's append path into one
// segment, the restored store's active one, whatever its segment size (up
// to MaxSegmentBytes): a takeover's jump moves it whole to its cut's
// start_segment (a sealed one would keep an id below the fence). The first
// append seals it and starts the next.
func TestRecoveredTailStaysInTheActiveSegment(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 1<<20)
	o.append(200) // about 20 KiB, never sealed
	o.ship()
	dir, rep := mustHydrate(t, b, 0, coldload.Options{Store: localseg.Options{SegmentMaxBytes: 4096}})
	if rep.TailRecords != 200 {
		t.Fatalf("report %+v", rep)
	}
	st := openRO(t, dir)
	sameRecords(t, allRecords(t, st), o.records())
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Segments) != 1 || snap.Segments[0].ID != 1 || snap.Segments[0].Sealed || snap.Segments[0].Size <= 4096 {
		t.Fatalf("segments %+v: want the whole tail in the active segment 1", snap.Segments)
	}
	st.Close()
	rw, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Append(localseg.Event{ExecutionID: "e", TransactionID: "t-after", Payload: "{}"}); err != nil {
		t.Fatal(err)
	}
	if snap, _ := rw.Snapshot(); len(snap.Segments) != 2 || !snap.Segments[0].Sealed || snap.Segments[1].ID != 2 {
		t.Fatalf("after an append: %+v", snap.Segments)
	}
}

// The frames recovered from tail objects reach the disk through one fsync
// per segment file; a failed one fails the restore (nothing is published),
// and every fsync a restore needs is checked the same way: a failure at any
// of them fails the restore and leaves no store under the target's name,
// except the last (of the parent directory, after the rename), which leaves
// the complete store there with the error.
func TestFailedFsyncFailsTheRestore(t *testing.T) {
	b, _ := memBucket(t)
	o := newOwner(t, b, 0, 2048)
	o.append(40)
	o.seal()
	o.publish()
	o.append(6)
	o.ship()

	// Count the restore's fsyncs, then fail each in turn.
	count := faultfs.NewCounter(faultfs.Kinds(faultfs.OpSync, faultfs.OpSyncDir))
	if _, err := coldload.Hydrate(ctxT(t), b, 0, target(t, 0), coldload.Options{Store: localseg.Options{FS: faultfs.Wrap(localseg.OSFS{}, count)}}); err != nil {
		t.Fatal(err)
	}
	n := count.Count()
	if n < 5 {
		t.Fatalf("only %d fsyncs in a restore", n)
	}
	sawSide := false
	for k := range n {
		fail := faultfs.OnIndex(k, faultfs.EIO, faultfs.Kinds(faultfs.OpSync, faultfs.OpSyncDir))
		dir := target(t, 0)
		_, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{Store: localseg.Options{FS: faultfs.Wrap(localseg.OSFS{}, fail)}})
		op, fired := fail.Fired()
		if !fired {
			t.Fatalf("fsync %d of %d never came", k, n)
		}
		if strings.Contains(op.Path, "/append/seg-") {
			sawSide = true
		}
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("fsync %d (%v) failed, restore returned %v", k, op, err)
		}
		if op.Kind == faultfs.OpSyncDir && filepath.Clean(op.Path) == filepath.Dir(dir) {
			// The publishing rename happened; only its durability is in
			// doubt. What is there is the whole store, and the error says
			// the restore did not finish.
			sameRecords(t, allRecords(t, openRO(t, dir)), o.records())
			continue
		}
		absentOrEmpty(t, dir)
	}
	if !sawSide {
		t.Fatal("no fsync of a recovered segment file was failed")
	}
}

// holdUntilInFlight makes every read of rec wait until n are in flight at
// once, then a moment longer, so a restore that ignored a bound of n would
// have more reads enter meanwhile.
func holdUntilInFlight(rec *recorder, n int64) {
	release := make(chan struct{})
	var armed sync.Once
	rec.gate = func(string) {
		if rec.inflight.Load() >= n {
			armed.Do(func() {
				go func() {
					time.Sleep(200 * time.Millisecond)
					close(release)
				}()
			})
		}
		select {
		case <-release:
		case <-time.After(time.Minute): // hang guard only
		}
	}
}
