package coldload_test

import (
	"context"
	"testing"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/watermark"
)

// emu is what the end-to-end test needs from an in-process emulator.
type emu interface {
	CreateBucket(name string) error
	OpenBucket(ctx context.Context, name string) (*blob.Bucket, error)
	PutRaw(bucket, key string, data []byte, meta map[string]string) error
	Close() error
}

// One end-to-end run on each real-protocol emulator: an owner ships sealed
// segments and its tail, reclaims through the bucket's watermark (by
// compare-and-swap, which these servers support), and a fresh disk
// hydrates from the bucket alone; Verify passes; then a segment corrupted
// at rest makes both fail naming its key.
func TestEndToEndOnEmulators(t *testing.T) {
	if testing.Short() {
		t.Skip("emulators in -short mode")
	}
	starts := map[string]func() (emu, error){
		"gofakes3":        func() (emu, error) { return emulator.StartS3() },
		"fake-gcs-server": func() (emu, error) { return emulator.StartGCS() },
	}
	for name, start := range starts {
		t.Run(name, func(t *testing.T) {
			e, err := start()
			if err != nil {
				t.Fatalf("start %s: %v", name, err)
			}
			t.Cleanup(func() { e.Close() })
			if err := e.CreateBucket("log"); err != nil {
				t.Fatal(err)
			}
			raw, err := e.OpenBucket(ctxT(t), "log")
			if err != nil {
				t.Fatal(err)
			}
			b := blobtier.New(raw, blobtier.Options{})
			t.Cleanup(func() { b.Close() })
			if !b.CanCAS() {
				t.Fatalf("%s bucket cannot compare-and-swap", name)
			}
			endToEnd(t, e, b)
		})
	}
}

func endToEnd(t *testing.T, e emu, b blobtier.Bucket) {
	ctx := ctxT(t)
	o := newOwner(t, b, 2, 4096)
	o.append(150)
	if _, err := o.st.Pull("proj", 1); err != nil {
		t.Fatal(err)
	}
	o.seal()
	ids := o.publish()
	through := o.sealed()[1]
	if _, err := o.st.Ack("proj", through.LastSeq); err != nil {
		t.Fatal(err)
	}
	// Shared reclaim in its order: watermark, local, bucket deletes.
	if _, err := watermark.Advance(ctx, b, 2, through.LastSeq, through.ID); err != nil {
		t.Fatalf("advance watermark: %v", err)
	}
	if _, err := o.st.Reclaim(through.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:2] {
		if err := b.Delete(ctx, blobtier.SegmentKey(2, id)); err != nil {
			t.Fatal(err)
		}
	}
	o.rep.Advance(150)
	o.append(9)
	if res := o.ship(); !res.CursorWritten || res.ShippedThrough != 159 {
		t.Fatalf("ship: %+v", res)
	}
	want := o.records()

	dir, rep := mustHydrate(t, b, 2, coldload.Options{})
	sameRecords(t, allRecords(t, openRW(t, dir)), want)
	if rep.Base != through.LastSeq || rep.TailRecords != 9 || rep.LastSeq != 159 || rep.Consumers != 1 {
		t.Fatalf("report %+v", rep)
	}
	vr, err := coldload.Verify(ctx, b, coldload.VerifyOptions{Shards: []uint32{2}})
	if err != nil || !vr.OK() {
		t.Fatalf("verify: %+v %v", vr.Problems, err)
	}

	// A flipped byte at rest, under the original metadata.
	key := blobtier.SegmentKey(2, ids[3])
	data, meta, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 0x20
	if err := e.PutRaw("log", key, data, meta.Encode()); err != nil {
		t.Fatal(err)
	}
	_, err = coldload.Hydrate(ctx, b, 2, target(t, 2), coldload.Options{})
	mustErrIs(t, err, coldload.ErrCorrupt, blobtier.ErrCorrupt)
	mustContain(t, err, key)
	vr, err = coldload.Verify(ctx, b, coldload.VerifyOptions{Shards: []uint32{2}})
	if err != nil {
		t.Fatal(err)
	}
	// The corrupt segment, and as a consequence a cursor object that now
	// claims more than the bucket holds intact.
	// (Problems are sorted by key: the cursor object's comes first.)
	if len(vr.Problems) != 2 || vr.Problems[1].Key != key || vr.Problems[1].Class != coldload.ProblemCorrupt ||
		vr.Problems[0].Class != coldload.ProblemCursor {
		t.Fatalf("verify problems %+v, want corrupt %s and the cursor beyond", vr.Problems, key)
	}
}
