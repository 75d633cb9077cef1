package coldload_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
)

// TestBitFlipAtEveryByteOfAnObjectIsDetected flips one bit at every byte
// offset of a sealed segment object and of a tail object, each written at
// rest with its original metadata (bit rot in the bucket), and restores
// after each flip: every restore must fail naming the damaged key, and none
// may return a wrong record. It reports the counts the reliability figures
// quote.
func TestBitFlipAtEveryByteOfAnObjectIsDetected(t *testing.T) {
	b, raw := memBucket(t)
	o := newOwner(t, b, 0, 2048)
	o.append(12)
	o.seal()
	o.publish()
	o.append(5)
	o.ship() // a tail object past the sealed segment, plus the cursor object

	segKey := blobtier.SegmentKey(0, 1)
	var tailKey string
	for _, info := range listed(t, b, 0, blobtier.KindTail) {
		tailKey = info.Key
	}
	if tailKey == "" {
		t.Fatal("no tail object")
	}
	ctx := ctxT(t)
	want := o.records()
	flips, detected, passed := 0, 0, 0
	for _, key := range []string{segKey, tailKey} {
		orig, err := raw.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for off := range orig {
			for _, bit := range []byte{0x01, 0x80} {
				rewriteAtRest(t, raw, key, func(d []byte) []byte { d[off] ^= bit; return d })
				flips++
				dir := target(t, 0)
				rep, err := coldload.Hydrate(ctx, b, 0, dir, coldload.Options{})
				rewriteAtRest(t, raw, key, func([]byte) []byte { return slices.Clone(orig) })
				var oe *coldload.ObjectError
				switch {
				case err == nil && key == segKey && slices.Equal(rep.DamagedSegments, []string{key}):
					// The last segment, passed over by name: the tail
					// objects hold its every event (docs/FORMAT.md §9.2).
					sameRecords(t, allRecords(t, openRO(t, dir)), want)
					passed++
					continue
				case err == nil:
					t.Fatalf("%s: a flip of bit %#x at byte %d restored without error", key, bit, off)
				case !errors.Is(err, coldload.ErrCorrupt) || !errors.As(err, &oe) || oe.Key != key:
					t.Fatalf("%s: flip at byte %d: %v (want corruption naming the key)", key, off, err)
				}
				detected++
				if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
					t.Fatalf("a failed restore left %s behind", dir)
				}
			}
		}
	}
	// The control: the undamaged bucket restores every record.
	_, rep := mustHydrate(t, b, 0, coldload.Options{})
	if rep.LastSeq != 17 {
		t.Fatalf("control restore: %+v", rep)
	}
	if passed == 0 {
		t.Fatal("no flip of the segment was passed over: its events are in tail objects too")
	}
	t.Logf("bit flips at every byte of a %d-object sample: %d flips, %d refused naming the key, %d restored by name from the tail objects, 0 silent", 2, flips, detected, passed)
}
