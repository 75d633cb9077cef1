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
// flipped on the way) is read back, found damaged, deleted and not
// committed: the cursor stays, it is no second writer, and the next pass
// ships the same events intact — also when the damaged object could not be
// deleted and still sits under the key.
func TestUploadReadsBackDamagedPut(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []faultbucket.Kind{faultbucket.Truncate, faultbucket.Extend, faultbucket.Corrupt} {
		for _, keep := range []bool{false, true} {
			fb := faultbucket.New(memblob.OpenBucket(nil), 3)
			b := blobtier.New(fb.Bucket(), blobtier.Options{})
			s := openStore(t, localseg.Options{SegmentMaxBytes: 8 << 10})
			r := tailbatch.New(0, 0, tailbatch.Options{})
			tip := appendN(t, s, 5)
			fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: kind, Key: "noetl.ehdb.tail.*", Times: 1})
			var noDelete int
			if keep {
				noDelete = fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpDelete, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*", Times: 1})
			}
			_, err := r.Replicate(ctx, s, b)
			if err == nil || errors.Is(err, blobtier.ErrConflict) || r.ShippedThrough() != 0 {
				t.Fatalf("%s keep=%v: damaged put: err %v, shipped %d", kind, keep, err, r.ShippedThrough())
			}
			if keep && fb.Fired(noDelete) != 1 {
				t.Fatalf("%s: the damaged object was not deleted", kind)
			}
			if keep {
				// The damaged object is still there: this pass finds it,
				// deletes it and fails.
				if _, err := r.Replicate(ctx, s, b); err == nil || errors.Is(err, blobtier.ErrConflict) || r.ShippedThrough() != 0 {
					t.Fatalf("%s: pass over the damaged object left behind: err %v, shipped %d", kind, err, r.ShippedThrough())
				}
			}
			if res, err := r.Replicate(ctx, s, b); err != nil || res.ShippedThrough != tip {
				t.Fatalf("%s keep=%v: next pass: %+v, %v", kind, keep, res, err)
			}
			if m := missing(bucketEvents(t, ctx, b, 0), tip); len(m) != 0 {
				t.Fatalf("%s keep=%v: the bucket misses %v", kind, keep, m)
			}
			b.Close()
		}
	}
}
