package bucketview_test

import (
	"context"
	"errors"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
)

// counting counts the requests of each operation.
func counting(t *testing.T) (blobtier.Bucket, map[blobtier.Op]int) {
	t.Helper()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	n := map[blobtier.Op]int{}
	return blobtier.Observe(b, func(op blobtier.Op, _ blobtier.Result, _, _ int64) { n[op]++ }), n
}

func TestReadSortsUnderstoodOrphansAndUnparsed(t *testing.T) {
	ctx := context.Background()
	b, n := counting(t)
	for _, k := range []string{blobtier.SegmentKey(3, 1), blobtier.SegmentKey(3, 2), blobtier.TailKey(3, 1, 4), blobtier.TailKey(3, 5, 9)} {
		if err := b.PutIfAbsent(ctx, k, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for k := range n {
		delete(n, k)
	}
	v, err := bucketview.Read(ctx, b, 3, bucketview.Options{Parts: bucketview.All})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.SegmentObjects) != 2 || v.SegmentObjects[0].Parsed.Segment != 1 || len(v.TailObjects) != 2 || v.TailObjects[1].Parsed.FirstSeq != 5 {
		t.Fatalf("view: %+v", v)
	}
	if len(v.Orphans) != 0 || len(v.Unparsed) != 0 {
		t.Fatalf("orphans %v unparsed %v with no watermark", v.Orphans, v.Unparsed)
	}
	if n[blobtier.OpList] != 2 || n[blobtier.OpGet] != 2 {
		t.Fatalf("requests: %v, want 2 listings and 2 reads", n)
	}
	// A partial view issues only its own requests.
	for k := range n {
		delete(n, k)
	}
	if _, err := bucketview.Read(ctx, b, 3, bucketview.Options{Parts: bucketview.Tails}); err != nil {
		t.Fatal(err)
	}
	if n[blobtier.OpList] != 1 || len(n) != 1 {
		t.Fatalf("requests of a tails-only view: %v", n)
	}
	// A refusal in Check ends the read before the next part.
	for k := range n {
		delete(n, k)
	}
	stop := errors.New("stop")
	_, err = bucketview.Read(ctx, b, 3, bucketview.Options{Parts: bucketview.All, Check: func(_ *bucketview.View, done bucketview.Parts) error {
		if done == bucketview.Watermark {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, stop) || n[blobtier.OpList] != 0 {
		t.Fatalf("check refusal: err %v, requests %v", err, n)
	}
}

func TestUnderstood(t *testing.T) {
	good := blobtier.ObjectInfo{Parsed: blobtier.Key{Kind: blobtier.KindTail, Shard: 1, FirstSeq: 1, LastSeq: 2}}
	if !bucketview.Understood(good, 1, blobtier.KindTail) {
		t.Fatal("own tail key not understood")
	}
	if bucketview.Understood(good, 2, blobtier.KindTail) || bucketview.Understood(good, 1, blobtier.KindSegment) {
		t.Fatal("another shard's or kind's key understood")
	}
	if bucketview.Understood(blobtier.ObjectInfo{ParseErr: blobtier.ErrBadKey}, 1, blobtier.KindTail) {
		t.Fatal("an unparsed key understood")
	}
}
