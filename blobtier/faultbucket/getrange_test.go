package faultbucket_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
)

// TestGetRangeFaults: blobtier's ranged read returns exactly the bytes
// asked (fewer only at the object's end), and the fault wrapper refuses,
// truncates, extends and corrupts it like any read: an OpRangeRead rule
// hits ranged reads only, an OpRead rule both. A short or long answer is
// ErrCorrupt; a flipped bit is not detectable here (the caller's frames
// catch it), so the bytes simply differ.
func TestGetRangeFaults(t *testing.T) {
	x := newFixture(t, 7)
	ctx := context.Background()
	key := blobtier.SegmentKey(0, 1)
	data := bytes.Repeat([]byte("0123456789abcdef"), 64)
	if err := x.b.PutIfAbsent(ctx, key, data, 1); err != nil {
		t.Fatal(err)
	}
	rg := x.b.(blobtier.RangeGetter)
	get := func(off, n int64) ([]byte, error) { return rg.GetRange(ctx, key, off, n) }
	if b, err := get(16, 100); err != nil || !bytes.Equal(b, data[16:116]) {
		t.Fatalf("GetRange(16, 100) = %d bytes, %v", len(b), err)
	}
	if b, err := get(int64(len(data))-10, 100); err != nil || !bytes.Equal(b, data[len(data)-10:]) {
		t.Fatalf("GetRange at the end = %d bytes, %v", len(b), err)
	}
	for _, bad := range [][2]int64{{-1, 10}, {0, 0}, {0, blobtier.MaxObjectBytes + 1}} {
		if _, err := get(bad[0], bad[1]); !errors.Is(err, blobtier.ErrBadRange) {
			t.Fatalf("GetRange(%d, %d): %v, want ErrBadRange", bad[0], bad[1], err)
		}
	}
	// A ranged-read rule leaves whole reads alone.
	id := x.add(t, faultbucket.Rule{Op: faultbucket.OpRangeRead, Kind: faultbucket.Refuse, Key: key})
	if _, _, err := x.b.Get(ctx, key); err != nil {
		t.Fatalf("a whole read under a ranged-read rule: %v", err)
	}
	if _, err := get(0, 100); err == nil || x.f.Fired(id) != 1 {
		t.Fatalf("a refused ranged read: %v (fired %d)", err, x.f.Fired(id))
	}
	x.f.Remove(id)
	for _, k := range []faultbucket.Kind{faultbucket.Truncate, faultbucket.Extend} {
		id := x.add(t, faultbucket.Rule{Op: faultbucket.OpRead, Kind: k, Key: key, Times: 1})
		if b, err := get(0, 100); !errors.Is(err, blobtier.ErrCorrupt) || x.f.Fired(id) != 1 {
			t.Fatalf("a %s ranged read: %d bytes, %v (fired %d)", k, len(b), err, x.f.Fired(id))
		}
		x.f.Remove(id)
	}
	id = x.add(t, faultbucket.Rule{Op: faultbucket.OpRangeRead, Kind: faultbucket.Corrupt, Key: key, Times: 1})
	if b, err := get(0, 100); err != nil || len(b) != 100 || bytes.Equal(b, data[:100]) || x.f.Fired(id) != 1 {
		t.Fatalf("a corrupted ranged read: %d bytes, %v, equal %v", len(b), err, bytes.Equal(b, data[:100]))
	}
	// Through Observe: reported as a get of the bytes returned.
	var got []int64
	ob := blobtier.Observe(x.b, func(op blobtier.Op, res blobtier.Result, up, down int64) {
		if op == blobtier.OpGet && res == blobtier.ResultOK {
			got = append(got, down)
		}
	}).(blobtier.RangeGetter)
	if b, err := ob.GetRange(ctx, key, 0, 40); err != nil || !bytes.Equal(b, data[:40]) || len(got) != 1 || got[0] != 40 {
		t.Fatalf("an observed ranged read: %d bytes, %v, reports %v", len(b), err, got)
	}
}
