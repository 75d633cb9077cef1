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

// Faults injected below blobtier (in the gocloud driver), so blobtier's own
// verification and error mapping run as in production: a lost answer on a
// tail write is retried into success without a second object, and under
// random refusals every injected refusal is one counted failure, the cursor
// never passes what landed, and everything ships once the bucket heals.
func TestFaultsBelowBlobtier(t *testing.T) {
	ctx := context.Background()
	fb := faultbucket.New(memblob.OpenBucket(nil), 7)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	s := openStore(t, localseg.Options{SegmentMaxBytes: 8 << 10})
	r := tailbatch.New(0, 0, tailbatch.Options{})

	lost := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.LostAck, Key: "noetl.ehdb.tail.*", Times: 1})
	tip := appendN(t, s, 12)
	if _, err := r.Replicate(ctx, s, b); err == nil || fb.Fired(lost) != 1 {
		t.Fatalf("lost answer: err %v, fired %d", err, fb.Fired(lost))
	}
	if r.ShippedThrough() != 0 {
		t.Fatalf("cursor moved to %d on a lost answer", r.ShippedThrough())
	}
	if res, err := r.Replicate(ctx, s, b); err != nil || res.ShippedThrough != tip {
		t.Fatalf("retry after a lost answer: %+v, %v", res, err)
	}
	if keys := keysOf(t, ctx, b, 0, blobtier.KindTail); len(keys) != 1 {
		t.Fatalf("tail objects after the retry: %v", keys)
	}
	failedBefore := r.Stats().Failed

	refuse := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "noetl.ehdb.tail.*", Prob: 0.5})
	for pass := range 40 {
		appendN(t, s, 3)
		res, err := r.Replicate(ctx, s, b)
		if err != nil && res.Failed != 1 {
			t.Fatalf("pass %d: %+v, %v", pass, res, err)
		}
		if m := missing(bucketEvents(t, ctx, b, 0), r.ShippedThrough()); len(m) != 0 {
			t.Fatalf("pass %d: cursor %d but the bucket misses %v", pass, r.ShippedThrough(), m)
		}
	}
	fired := fb.Fired(refuse)
	if fired == 0 || r.Stats().Failed-failedBefore != uint64(fired) {
		t.Fatalf("%d refusals injected, %d failures counted", fired, r.Stats().Failed-failedBefore)
	}
	fb.Remove(refuse)
	if _, err := r.Replicate(ctx, s, b); err != nil || r.ShippedThrough() != s.Tip() {
		t.Fatalf("after the faults: %v, cursor %d, tip %d", err, r.ShippedThrough(), s.Tip())
	}
	if m := missing(bucketEvents(t, ctx, b, 0), s.Tip()); len(m) != 0 {
		t.Fatalf("bucket misses %v", m)
	}
	c, _, err := tailbatch.ReadCursor(ctx, b, 0)
	if err != nil || c.ShippedThrough != s.Tip() {
		t.Fatalf("cursor object %+v, %v", c, err)
	}
	if errors.Is(r.Err(), blobtier.ErrConflict) {
		t.Fatal("a refusal was taken for a second writer")
	}
}
