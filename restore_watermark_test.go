package bucketlog

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/watermark"
)

// Issue 12 finding 11, end to end: a forged watermark (valid digest) far
// above the bucket's objects is refused by restore and by the hydrate of an
// owner opening an empty directory, as an invalid state naming the
// watermark; restore takes it when told.
func TestForgedWatermarkRefusedByRestoreAndHydrate(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, SegmentMaxBytes: 4096, NoBackground: true})
	for i := 1; i <= 30; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var top uint64
	for info, err := range b.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			t.Fatal(err)
		}
		top = max(top, info.Parsed.Segment)
	}
	forged := watermark.Mark{Seq: 999_999, Segment: top, V: 7}
	if err := b.Put(ctx, blobtier.WatermarkKey(0), forged.Encode()); err != nil {
		t.Fatal(err)
	}

	vr, err := Verify(ctx, "", b, coldload.VerifyOptions{})
	if err != nil || vr.OK() {
		t.Fatalf("verify of a forged watermark: ok=%v %v", vr.OK(), err)
	}
	_, err = Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if !errors.Is(err, coldload.ErrWatermarkAhead) || Class(err) != ClassInvalidState {
		t.Fatalf("restore over a forged watermark: %v (class %s)", err, Class(err))
	}
	_, err = Open(ctx, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
	if !errors.Is(err, coldload.ErrWatermarkAhead) || Class(err) != ClassInvalidState {
		t.Fatalf("open (hydrate) over a forged watermark: %v (class %s)", err, Class(err))
	}
	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir(), AllowWatermarkAhead: true})
	if err != nil || rep.WatermarkAhead == "" {
		t.Fatalf("restore told to take the watermark: %+v %v", rep, err)
	}
}
