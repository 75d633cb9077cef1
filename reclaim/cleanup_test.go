package reclaim

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/watermark"
)

func TestCleanupTailReclaimsWhatADurableSegmentCovers(t *testing.T) { // §6.5 (bucket side)
	ctx := context.Background()
	j := &journal{}
	b := newFakeBucket(j)
	b.put(blobtier.TailKey(0, 1, 10), make([]byte, 100))
	b.put(blobtier.TailKey(0, 11, 20), make([]byte, 200))
	b.put(blobtier.TailKey(0, 21, 25), make([]byte, 50))
	b.put(blobtier.TailKey(1, 1, 10), make([]byte, 100)) // another shard
	res, err := CleanupTail(ctx, b, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reclaimed != 2 || res.Bytes != 300 || res.Retained != 1 || res.Failed != 0 || res.Unparsed != 0 {
		t.Fatalf("result %+v", res)
	}
	if got := tailLasts(b, 0); !slices.Equal(got, []uint64{25}) {
		t.Fatalf("left %v", got)
	}
	if !b.has(blobtier.TailKey(1, 1, 10)) {
		t.Fatal("another shard's tail object was deleted")
	}
	// A second pass with the same watermark deletes nothing and still
	// reports what it keeps.
	res, err = CleanupTail(ctx, b, 0, 20)
	if err != nil || res.Reclaimed != 0 || res.Retained != 1 {
		t.Fatalf("second pass %+v, %v", res, err)
	}
}

// TestCleanupTailSafetyCase: segments durable / not yet uploaded /
// durable. The contiguous watermark stops after the first segment, so the
// tail objects holding the middle segment's events (their only off-box
// copy) stay, and so does everything after them.
func TestCleanupTailSafetyCase(t *testing.T) { // §6.6
	ctx := context.Background()
	snap := synth(0, 4, 8, 2, nil) // 1..8, 9..16, 17..24 sealed; 25..26 active
	b := bucketWith(nil, 0, snap, 1, 3)
	seq, seg := watermark.Contiguous(snap.Segments, inBucket(b, 0))
	if seq != 8 || seg != 1 {
		t.Fatalf("Contiguous = (%d, %d), want (8, 1)", seq, seg)
	}
	res, err := CleanupTail(ctx, b, 0, seq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reclaimed != 1 || res.Retained != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, last := range tailLasts(b, 0) {
		if last <= 8 {
			t.Fatalf("tail object ending at %d survived", last)
		}
	}
	if !slices.Contains(tailLasts(b, 0), 16) {
		t.Fatal("NOTHING covering the middle segment may be deleted while it is local-only")
	}
}

func TestCleanupTailKeepsUnrecognisedKeys(t *testing.T) { // §6.7
	ctx := context.Background()
	b := newFakeBucket(nil)
	odd := []string{
		"noetl.ehdb.tail.00000000.0000000000000001",                        // too few parts
		"noetl.ehdb.tail.00000000.0000000000000001.000000000000000A",       // uppercase hex
		"noetl.ehdb.tail.00000000.0000000000000009.0000000000000001",       // first above last
		"noetl.ehdb.tail.00000000.0000000000000001.0000000000000002.extra", // extra part
		"noetl.ehdb.tail.00000000.backup/0000000000000001",
	}
	for _, k := range odd {
		b.put(k, []byte("keep me"))
	}
	b.put(blobtier.TailKey(0, 1, 2), []byte("superseded"))
	res, err := CleanupTail(ctx, b, 0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unparsed != len(odd) || res.Reclaimed != 1 || res.Retained != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, k := range odd {
		if !b.has(k) {
			t.Fatalf("unrecognised key %s was deleted", k)
		}
	}
}

func TestCleanupTailWithNothingReportsZero(t *testing.T) { // §6.8
	res, err := CleanupTail(context.Background(), newFakeBucket(nil), 0, 1000)
	if err != nil || res.Reclaimed != 0 || res.Bytes != 0 || res.Failed != 0 || res.Retained != 0 || res.Unparsed != 0 {
		t.Fatalf("result %+v, %v", res, err)
	}
}

func TestCleanupTailCountsAFailedDeleteAndRetries(t *testing.T) {
	ctx := context.Background()
	b := newFakeBucket(nil)
	b.put(blobtier.TailKey(0, 1, 10), make([]byte, 100))
	b.put(blobtier.TailKey(0, 11, 20), make([]byte, 100))
	b.failDel[blobtier.TailKey(0, 1, 10)] = true
	res, err := CleanupTail(ctx, b, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reclaimed != 1 || res.Failed != 1 || res.Retained != 1 || len(res.Errors) != 1 ||
		!strings.Contains(res.Errors[0], blobtier.TailKey(0, 1, 10)) {
		t.Fatalf("result %+v", res)
	}
	delete(b.failDel, blobtier.TailKey(0, 1, 10))
	if res, err := CleanupTail(ctx, b, 0, 20); err != nil || res.Reclaimed != 1 || res.Retained != 0 {
		t.Fatalf("retry %+v, %v", res, err)
	}
}
