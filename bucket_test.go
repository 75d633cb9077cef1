package bucketlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

func s3Bucket(t *testing.T) blobtier.Bucket {
	t.Helper()
	srv, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.CreateBucket("log"); err != nil {
		t.Fatal(err)
	}
	raw, err := srv.OpenBucket(ctxT(t), "log")
	if err != nil {
		t.Fatal(err)
	}
	b := blobtier.New(raw, blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	return b
}

func TestSecondWriterStopsShipping(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	reg := prometheus.NewRegistry()
	a := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Registerer: reg})
	defer a.Close()
	for i := 1; i <= 3; i++ {
		a.Append(ctx, ev("1", i))
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	// A second process believes it owns the shard too: it hydrates the same
	// history, then appends different events.
	bl := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
	defer bl.Close()
	for i := 4; i <= 5; i++ {
		a.Append(ctx, ev("1", i))
		bl.Append(ctx, ev("2", i))
	}
	if _, err := bl.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	_, err := a.Ship(ctx, false)
	if !errors.Is(err, ErrSecondWriter) {
		t.Fatalf("ship over a second writer's object: %v", err)
	}
	if ready, why := a.Health(); ready || !strings.Contains(why, "noetl.ehdb.tail.") {
		t.Fatalf("health after a second writer: %v %q", ready, why)
	}
	if got := testutil.ToFloat64(a.m.SecondWriterDetected); got != 1 {
		t.Fatalf("second_writer_detected_total = %v", got)
	}
	// Appends are refused (they could never ship); shipping stays stopped.
	if _, err := a.Append(ctx, ev("1", 6)); !errors.Is(err, ErrSecondWriter) {
		t.Fatalf("append after a second writer: %v", err)
	}
	if _, err := a.Ship(ctx, false); !errors.Is(err, ErrSecondWriter) {
		t.Fatalf("shipping resumed after a second writer: %v", err)
	}
}

func TestDivergedDiskRefused(t *testing.T) {
	ctx := ctxT(t)
	raw := memblob.OpenBucket(nil)
	b := blobtier.New(raw, blobtier.Options{})
	defer b.Close()
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	for i := 1; i <= 3; i++ {
		l.Append(ctx, ev("1", i))
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Replace the bucket's segment 1 by a different, self-consistent object
	// (another history), as a foreign writer would have left it.
	data := foreignSegment(t)
	key := blobtier.SegmentKey(0, 1)
	w, err := raw.NewWriter(ctx, key, &blob.WriterOptions{Metadata: blobtier.MetaOf(data, 0).Encode()})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Options{Dir: dir, Bucket: b, NoBackground: true})
	if !errors.Is(err, ErrDiverged) || Class(err) != ClassInvalidState {
		t.Fatalf("diverged open: %v", err)
	}
}

func TestRefusingBucketNeverFailsAppends(t *testing.T) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, SegmentMaxBytes: 2048})
	defer l.Close()
	id := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal})
	for i := 1; i <= 50; i++ {
		if _, err := l.Append(ctx, ev("3", i)); err != nil {
			t.Fatalf("append %d with the bucket refusing: %v", i, err)
		}
	}
	if _, err := l.Ship(ctx, false); err == nil {
		t.Fatal("ship succeeded against a refusing bucket")
	}
	if ready, why := l.Health(); ready || !strings.Contains(why, "bucket failing") {
		t.Fatalf("health: %v %q", ready, why)
	}
	if got := testutil.ToFloat64(l.m.TailReplicationFailed); got != 0 && fb.Fired(id) == 0 {
		t.Fatalf("no fault fired")
	}
	fb.Remove(id)
	rep, err := l.Ship(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ShippedThrough != 50 {
		t.Fatalf("after recovery: %+v", rep)
	}
	if ready, why := l.Health(); !ready {
		t.Fatalf("not ready after recovery: %q", why)
	}
}

func TestSharedGCOnS3(t *testing.T) {
	ctx := ctxT(t)
	b := s3Bucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true, SegmentMaxBytes: 1024})
	for i := 1; i <= 200; i++ {
		if _, err := l.Append(ctx, ev(fmt.Sprint(i%5), i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Pull(ctx, "proj", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "proj", 150); err != nil {
		t.Fatal(err)
	}
	// GC before anything is in the bucket reclaims nothing: only durable
	// segments may go.
	rep, err := l.GC(ctx, GCRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Local.Removed) != 0 {
		t.Fatalf("reclaimed segments not yet in the bucket: %+v", rep.Local)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	rep, err = l.GC(ctx, GCRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != "reclaimed" || rep.Base < 100 || rep.Base > 151 {
		t.Fatalf("gc: %+v", rep)
	}
	l.Close()
	// A restore from the bucket alone keeps the base and every retained event.
	dst := t.TempDir()
	rr, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Base+1 != rep.Base || rr.LastSeq != 200 {
		t.Fatalf("restore after GC: base %d want %d, last %d", rr.Base+1, rep.Base, rr.LastSeq)
	}
	r := mustOpen(t, Options{Dir: dst, Bucket: b, NoBackground: true, SegmentMaxBytes: 1024})
	defer r.Close()
	p, err := r.Scan(ctx, 0, 1000)
	if err != nil || !p.Clamped || p.Records[0].Seq != rep.Base || uint64(len(p.Records)) != 200-rep.Base+1 {
		t.Fatalf("restored scan: clamped=%v first=%d n=%d err=%v", p.Clamped, p.Records[0].Seq, len(p.Records), err)
	}
	res, err := r.Append(ctx, ev("1", 201))
	if err != nil || res.Seq != 201 {
		t.Fatalf("append after restore: %+v %v", res, err)
	}
}

func TestGCWithoutBucketOnShippingStoreRefused(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	l.Append(ctx, ev("1", 1))
	l.Close()
	l = mustOpen(t, Options{Dir: dir, NoBackground: true})
	defer l.Close()
	if _, err := l.GC(ctx, GCRequest{}); !errors.Is(err, ErrUsage) {
		t.Fatalf("gc without the bucket: %v", err)
	}
	if _, err := Open(ctx, Options{Dir: dir}); !errors.Is(err, ErrUsage) {
		t.Fatalf("serve-style open without the bucket: %v", err)
	}
}

// TestUploaderRefusesACorruptSealedSegment is CHECKLIST §3.13: local bit rot
// in a sealed segment never reaches the bucket under a fresh, valid digest.
// RED half: the same bytes put without the frame check land with a digest
// that verifies.
func TestUploaderRefusesACorruptSealedSegment(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true, DisableTailReplication: true})
	for i := 1; i <= 10; i++ {
		l.Append(ctx, ev("1", i))
	}
	if _, err := l.Store().Seal(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Bit rot in the middle of sealed segment 1, on the local disk, before
	// the uploader reads it.
	path := filepath.Join(dir, "shard-0000", localseg.SegmentFileName(1))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = l.Ship(ctx, false)
	if !errors.Is(err, localseg.ErrCorrupt) {
		t.Fatalf("ship of a corrupt sealed segment: %v", err)
	}
	if _, _, err := b.Get(ctx, blobtier.SegmentKey(0, 1)); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("the corrupt segment reached the bucket: %v", err)
	}
	if ready, why := l.Health(); ready {
		t.Fatalf("ready with a segment that cannot ship (%q)", why)
	}
	// RED: without the frame check, a put of the same bytes succeeds and its
	// digest verifies — the bucket alone could not tell.
	if err := b.PutIfAbsent(ctx, blobtier.SegmentKey(9, 1), data, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, blobtier.SegmentKey(9, 1)); err != nil {
		t.Fatalf("RED: the rotten bytes should verify under their own digest: %v", err)
	}
}

// TestNewOwnerHydratesOnlyItsOwnedShard: the only hydrate path is Open, and
// it materializes exactly the owned shard. A fresh owner of shard 1 of 2
// hydrates shard 1 and continues its sequence; shard 0, which it does not
// own, is never written under its root (reads of it are cold and read-only,
// an append to it is refused naming the owner), on the S3 emulator.
func TestNewOwnerHydratesOnlyItsOwnedShard(t *testing.T) {
	ctx := ctxT(t)
	b := s3Bucket(t)
	execFor := func(shard int) []string {
		var ids []string
		for i := 0; len(ids) < 3; i++ {
			if id := fmt.Sprintf("exec-%d", i); affinity.ShardFor(id, 2) == shard {
				ids = append(ids, id)
			}
		}
		return ids
	}
	owned := map[int][]string{0: execFor(0), 1: execFor(1)}
	for shard := range 2 {
		l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, ShardIndex: shard, ShardCount: 2, NoBackground: true})
		for i := 1; i <= 4; i++ {
			if _, err := l.Append(ctx, ev(owned[shard][i%3], i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Ship(ctx, true); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}

	root := t.TempDir()
	l := mustOpen(t, Options{Dir: root, Bucket: b, ShardIndex: 1, ShardCount: 2, NoBackground: true})
	defer l.Close()
	if rep := l.OpenReport(); !rep.Hydrated || rep.Shard != 1 {
		t.Fatalf("open report: %+v", rep)
	}
	p, err := l.Scan(ctx, 0, 100)
	if err != nil || len(p.Records) != 4 {
		t.Fatalf("hydrated shard 1: %d records, %v", len(p.Records), err)
	}
	for _, r := range p.Records {
		if affinity.ShardFor(r.ExecutionID, 2) != 1 {
			t.Fatalf("shard 1 holds %q of another shard", r.ExecutionID)
		}
	}
	res, err := l.Append(ctx, ev(owned[1][0], 5))
	if err != nil || res.Seq != 5 {
		t.Fatalf("append after hydrate: %+v %v", res, err)
	}
	// Shard 0 is not ours: an append is refused naming its owner, a read is
	// served cold, and neither leaves anything of shard 0 under our root.
	_, err = l.Append(ctx, ev(owned[0][0], 9))
	var ne *affinity.NotOwnerError
	if !errors.As(err, &ne) || ne.Owner != 0 {
		t.Fatalf("append of a shard-0 event: %v", err)
	}
	rr, err := l.ScanShard(ctx, 0, 0, 100)
	if err != nil || len(rr.Page.Records) != 4 || rr.ServedBy == affinity.ServedByOwnerResident {
		t.Fatalf("cold read of shard 0: %d records served by %q, %v", len(rr.Page.Records), rr.ServedBy, err)
	}
	if _, err := os.Stat(localseg.ShardDir(root, 0)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("shard 0's directory under the owner of shard 1: %v", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), filepath.Base(localseg.ShardDir(root, 0))) {
			t.Fatalf("shard 0's %q under the owner of shard 1", e.Name())
		}
	}
}

// TestForeignSegmentObjectStopsShipping: a different object already under
// one of the shard's segment keys (a second writer's upload) stops shipping
// for the shard mid-run — an error naming the key, not ready, counted — and
// the foreign object is neither overwritten nor taken as ours.
func TestForeignSegmentObjectStopsShipping(t *testing.T) {
	ctx := ctxT(t)
	raw := memblob.OpenBucket(nil)
	b := blobtier.New(raw, blobtier.Options{})
	defer b.Close()
	reg := prometheus.NewRegistry()
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Registerer: reg})
	defer l.Close()
	for i := 1; i <= 3; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	foreign := foreignSegment(t)
	key := blobtier.SegmentKey(0, 1)
	if err := raw.WriteAll(ctx, key, foreign, &blob.WriterOptions{Metadata: blobtier.MetaOf(foreign, 0).Encode()}); err != nil {
		t.Fatal(err)
	}

	_, err := l.Ship(ctx, true)
	if !errors.Is(err, ErrSecondWriter) || !strings.Contains(err.Error(), key) {
		t.Fatalf("ship over a foreign segment object: %v", err)
	}
	if ready, why := l.Health(); ready || !strings.Contains(why, key) {
		t.Fatalf("health: %v %q", ready, why)
	}
	if got := testutil.ToFloat64(l.m.SecondWriterDetected); got != 1 {
		t.Fatalf("second_writer_detected_total = %v", got)
	}
	got, err := raw.ReadAll(ctx, key)
	if err != nil || string(got) != string(foreign) {
		t.Fatalf("the foreign object was replaced: %v", err)
	}
	if _, err := l.Ship(ctx, false); !errors.Is(err, ErrSecondWriter) {
		t.Fatalf("shipping resumed after a second writer: %v", err)
	}
	// Appends are refused: they could never ship.
	if _, err := l.Append(ctx, ev("1", 4)); !errors.Is(err, ErrSecondWriter) {
		t.Fatalf("append after a second writer: %v", err)
	}
}

// foreignSegment is another writer's sealed segment 1: self-consistent
// frames of a different history (three events of execution "9").
func foreignSegment(t *testing.T) []byte {
	t.Helper()
	o, err := localseg.Open(t.TempDir(), localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for i := 1; i <= 3; i++ {
		if _, err := o.Append(ev("9", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.Seal(); err != nil {
		t.Fatal(err)
	}
	data, err := o.ReadSegment(1)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFirstOpenCrashSweep: the first Open of a shard on a new machine is
// interrupted at every filesystem operation in turn (the shard directory,
// the hydration, the writer lock, the first segment, the checkpoint,
// bucket.json), then the process starts again: every restart opens, holds
// exactly what the bucket held, and continues the sequence.
func TestFirstOpenCrashSweep(t *testing.T) {
	ctx := ctxT(t)
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("bucket_with_events=%v", full), func(t *testing.T) {
			b := memBucket(t)
			want := 0
			if full {
				want = shipEvents(t, b, 5)
			}
			var k int64
			for ; ; k++ {
				root := t.TempDir()
				crash := faultfs.CrashAt(k)
				l, err := Open(ctx, Options{Dir: root, Bucket: b, NoBackground: true, FS: faultfs.Wrap(localseg.OSFS{}, crash)})
				if _, crashed := crash.Crashed(); !crashed {
					if err != nil {
						t.Fatalf("open without a crash: %v", err)
					}
					l.Close()
					break
				}
				if err == nil {
					l.Close()
				}
				l, err = Open(ctx, Options{Dir: root, Bucket: b, NoBackground: true})
				if err != nil {
					t.Fatalf("restart after a crash at point %d: %v", k, err)
				}
				p, err := l.Scan(ctx, 0, 100)
				if err != nil || len(p.Records) != want {
					t.Fatalf("restart after a crash at point %d: %d records (%v), want %d", k, len(p.Records), err, want)
				}
				if res, err := l.Append(ctx, ev("1", want+1)); err != nil || res.Seq != uint64(want+1) {
					t.Fatalf("append after a crash at point %d: %+v %v", k, res, err)
				}
				// Close ships the tail: the bucket now holds one more.
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				want++
			}
			if k < 10 {
				t.Fatalf("only %d crash points: the sweep did not exercise the open", k)
			}
			t.Logf("%d crash points", k)
		})
	}
}

// TestOpenHydratesOverAStoreThatNeverStarted: a store's first open takes
// the writer lock before it creates its first segment, so a crash (or a
// full disk) in between leaves a shard directory holding only LOCK — for
// instance on the first run of a service before its bucket was configured.
// The crash is produced at every point of such an open until it leaves
// exactly that; an Open with the bucket then hydrates the shard instead of
// refusing the directory as not empty, and continues the sequence.
func TestOpenHydratesOverAStoreThatNeverStarted(t *testing.T) {
	ctx := ctxT(t)
	b := s3Bucket(t)
	want := shipEvents(t, b, 5)
	for k := int64(0); ; k++ {
		root := t.TempDir()
		dir := localseg.ShardDir(root, 0)
		crash := faultfs.CrashAt(k)
		st, err := localseg.Open(dir, localseg.Options{FS: faultfs.Wrap(localseg.OSFS{}, crash)})
		if _, crashed := crash.Crashed(); !crashed {
			if err == nil {
				st.Close()
			}
			t.Fatalf("no crash point of a first open left only LOCK (%d points)", k)
		}
		if err == nil {
			st.Close()
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "LOCK" {
			continue
		}
		l, err := Open(ctx, Options{Dir: root, Bucket: b, NoBackground: true})
		if err != nil {
			t.Fatalf("open over a directory holding only LOCK (crash point %d): %v", k, err)
		}
		defer l.Close()
		p, err := l.Scan(ctx, 0, 100)
		if err != nil || len(p.Records) != want || !l.OpenReport().Hydrated {
			t.Fatalf("after hydrating over the unstarted store: %d records (%v), hydrated %v", len(p.Records), err, l.OpenReport().Hydrated)
		}
		if res, err := l.Append(ctx, ev("1", want+1)); err != nil || res.Seq != uint64(want+1) {
			t.Fatalf("append: %+v %v", res, err)
		}
		t.Logf("crash point %d of a first open left only LOCK; Open hydrated %d events over it", k, want)
		return
	}
}

// shipEvents appends n events to a fresh owner of shard 0 shipping to b,
// ships them with the active segment sealed, and closes it.
func shipEvents(t *testing.T, b blobtier.Bucket, n int) int {
	t.Helper()
	ctx := ctxT(t)
	o := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
	defer o.Close()
	for i := 1; i <= n; i++ {
		if _, err := o.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	return n
}
