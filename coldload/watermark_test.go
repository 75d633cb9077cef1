package coldload_test

import (
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
	"testing"
)

// Finding 11: a watermark the bucket's own objects do not support (above the
// cursor object's shipped_through and above every sequence the segment and
// tail objects hold) is an inconsistency: verify lists it, a restore refuses
// it unless AllowWatermarkAhead.
func TestForgedWatermarkIsRefused(t *testing.T) {
	forged := func(t *testing.T, withCursor bool) blobtier.Bucket {
		b, _ := memBucket(t)
		o := newOwner(t, b, 0, 1024)
		o.append(30)
		o.seal()
		o.publish()
		if withCursor {
			o.ship()
		}
		top := uint64(0)
		for _, s := range o.sealed() {
			top = max(top, s.ID)
		}
		putWatermark(t, b, 0, 999_999, top)
		return b
	}
	for _, withCursor := range []bool{true, false} {
		name := "with cursor object"
		if !withCursor {
			name = "without cursor object"
		}
		t.Run(name, func(t *testing.T) {
			b := forged(t, withCursor)
			vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(vr.Problems) != 1 || vr.Problems[0].Class != coldload.ProblemWatermark || vr.Problems[0].Key != blobtier.WatermarkKey(0) {
				t.Fatalf("verify problems %+v", vr.Problems)
			}
			dir := target(t, 0)
			_, err = coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
			mustErrIs(t, err, coldload.ErrWatermarkAhead, localseg.ErrInvalidState)
			mustContain(t, err, "999999", "30")
			absentOrEmpty(t, dir)
			noLeftovers(t, dir)
			// Told, the restore takes the watermark as it is and says so.
			dir, rep := mustHydrate(t, b, 0, coldload.Options{AllowWatermarkAhead: true})
			if rep.WatermarkAhead == "" || rep.Base != 999_999 {
				t.Fatalf("report %+v", rep)
			}
			if tip := openRO(t, dir).Tip(); tip != 999_999 {
				t.Fatalf("tip %d", tip)
			}
		})
	}
}

// The legitimate states next to a forged watermark restore as before.
func TestWatermarkSupportedByTheObjects(t *testing.T) {
	t.Run("everything reclaimed: watermark and cursor object only", func(t *testing.T) {
		b, _ := memBucket(t)
		putWatermark(t, b, 0, 500, 9)
		putCursor(t, b, 0, tailbatch.Cursor{V: 4, ShippedThrough: 500, Consumers: map[string]uint64{"c": 500}})
		dir, rep := mustHydrate(t, b, 0, coldload.Options{})
		if rep.WatermarkAhead != "" || rep.NextSegment != 10 {
			t.Fatalf("report %+v", rep)
		}
		st := openRW(t, dir)
		if st.Tip() != 500 {
			t.Fatalf("tip %d", st.Tip())
		}
		vr, err := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
		if err != nil || !vr.OK() {
			t.Fatalf("verify %+v %v", vr.Problems, err)
		}
	})
	t.Run("the cursor object lags, a segment above continues the watermark", func(t *testing.T) {
		b, _ := memBucket(t)
		putWatermark(t, b, 0, 6, 2)
		put(t, b, blobtier.SegmentKey(0, 3), frames(t, evFrames(7, 9, plain)...))
		putCursor(t, b, 0, tailbatch.Cursor{V: 4, ShippedThrough: 4})
		_, rep := mustHydrate(t, b, 0, coldload.Options{})
		if rep.WatermarkAhead != "" || rep.LastSeq != 9 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("no cursor object, a tail object ending at the watermark", func(t *testing.T) {
		b, _ := memBucket(t)
		putWatermark(t, b, 0, 6, 2)
		put(t, b, blobtier.TailKey(0, 4, 6), frames(t, evFrames(4, 6, plain)...))
		mustHydrate(t, b, 0, coldload.Options{})
	})
	t.Run("no cursor object, the watermark's own segment still listed", func(t *testing.T) {
		b, _ := memBucket(t)
		putWatermark(t, b, 0, 6, 2)
		put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(4, 6, plain)...))
		mustHydrate(t, b, 0, coldload.Options{})
	})
	t.Run("no cursor object, the watermark's segment ends elsewhere", func(t *testing.T) {
		b, _ := memBucket(t)
		putWatermark(t, b, 0, 60, 2)
		put(t, b, blobtier.SegmentKey(0, 2), frames(t, evFrames(4, 6, plain)...))
		_, err := coldload.Hydrate(ctxT(t), b, 0, target(t, 0), coldload.Options{})
		mustErrIs(t, err, coldload.ErrWatermarkAhead)
	})
	t.Run("no cursor object, nothing else", func(t *testing.T) {
		b, _ := memBucket(t)
		putWatermark(t, b, 0, 500, 9)
		_, err := coldload.Hydrate(ctxT(t), b, 0, target(t, 0), coldload.Options{})
		mustErrIs(t, err, coldload.ErrWatermarkAhead)
	})
}
