package tailbatch_test

import (
	"context"
	"errors"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// A tail put that lands damaged bytes (truncated, extended or with a bit
// flipped on the way) is read back and found damaged: it is deleted and put
// once more in the same pass. When that lands damaged too, or the damaged
// object cannot be deleted, the batch fails — not as a second writer, and
// the cursor stays — and a later pass ships the same events intact.
func TestUploadReadsBackDamagedPut(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []faultbucket.Kind{faultbucket.Truncate, faultbucket.Extend, faultbucket.Corrupt} {
		for _, tc := range []struct {
			name     string
			puts     int  // damaged puts
			noDelete bool // the first delete is refused
		}{{"once", 1, false}, {"twice", 2, false}, {"not_deleted", 1, true}} {
			fb := faultbucket.New(memblob.OpenBucket(nil), 3)
			b := blobtier.New(fb.Bucket(), blobtier.Options{})
			s := openStore(t, localseg.Options{SegmentMaxBytes: 8 << 10})
			r := tailbatch.New(0, 0, tailbatch.Options{})
			tip := appendN(t, s, 5)
			damage := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: kind, Key: blobtier.TailKey(0, 1, 5), Times: tc.puts})
			if tc.noDelete {
				fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpDelete, Kind: faultbucket.Refuse, Key: blobtier.TailKey(0, 1, 5), Times: 1})
			}
			_, err := r.Replicate(ctx, s, b)
			if fb.Fired(damage) == 0 {
				t.Fatalf("%s %s: no put was damaged", kind, tc.name)
			}
			if tc.name == "once" {
				if err != nil || r.ShippedThrough() != tip {
					t.Fatalf("%s %s: a damaged put is put again in the same pass: shipped %d, %v", kind, tc.name, r.ShippedThrough(), err)
				}
			} else {
				if err == nil || !errors.Is(err, tailbatch.ErrDamaged) || errors.Is(err, blobtier.ErrConflict) || r.ShippedThrough() != 0 {
					t.Fatalf("%s %s: damaged puts: err %v, shipped %d", kind, tc.name, err, r.ShippedThrough())
				}
				if _, err := r.Replicate(ctx, s, b); err != nil || r.ShippedThrough() != tip {
					t.Fatalf("%s %s: next pass: shipped %d, %v", kind, tc.name, r.ShippedThrough(), err)
				}
			}
			if m := missing(bucketEvents(t, ctx, b, 0), tip); len(m) != 0 {
				t.Fatalf("%s %s: the bucket misses %v", kind, tc.name, m)
			}
			b.Close()
		}
	}
}

// TestUploadKeepingNeverDeletes: UploadKeeping, which the uploader's bridge
// of a damaged segment object uses, fails on an object of ours that reads
// back damaged and leaves it where it is (an existing tail object under the
// key may be the last one holding its events: sim seed 6016684); Upload
// deletes it and puts it again.
func TestUploadKeepingNeverDeletes(t *testing.T) {
	ctx := context.Background()
	for _, keep := range []bool{true, false} {
		fb := faultbucket.New(memblob.OpenBucket(nil), 3)
		b := blobtier.New(fb.Bucket(), blobtier.Options{})
		s := openStore(t, localseg.Options{SegmentMaxBytes: 8 << 10})
		appendN(t, s, 5)
		r := tailbatch.New(0, 0, tailbatch.Options{})
		batches, err := r.Prepare(s)
		if err != nil || len(batches) != 1 {
			t.Fatalf("prepare: %v %v", batches, err)
		}
		bt := batches[0]
		fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Truncate, Key: bt.Key, Times: 1})
		up := tailbatch.Upload
		if keep {
			up = tailbatch.UploadKeeping
		}
		err = up(ctx, b, s, bt)
		_, _, gerr := b.Get(ctx, bt.Key)
		switch {
		case keep && (!errors.Is(err, tailbatch.ErrDamaged) || !errors.Is(gerr, blobtier.ErrCorrupt)):
			t.Fatalf("UploadKeeping: %v; the object reads %v, want it kept damaged", err, gerr)
		case !keep && (err != nil || gerr != nil):
			t.Fatalf("Upload: %v; the object reads %v, want it put again", err, gerr)
		}
		b.Close()
	}
}
