package bucketview_test

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/fencing"
)

// listOrder records the kinds listed, in order.
type listOrder struct {
	blobtier.Bucket
	kinds []blobtier.Kind
}

func (l *listOrder) List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	l.kinds = append(l.kinds, kind)
	return l.Bucket.List(ctx, shard, kind)
}

func putRecord(t *testing.T, b blobtier.Bucket, shard uint32, r fencing.StartRecord) {
	t.Helper()
	ctx := context.Background()
	c := fencing.Claim{Epoch: r.Epoch, Shard: shard, Owner: "pod-" + string(rune('a'+r.Epoch)) + "/boot", Nonce: fencing.NewNonce()}
	cb, _ := c.Encode()
	rb, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, blobtier.ClaimKey(shard, r.Epoch), cb, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, blobtier.StartKey(shard, r.Epoch), rb, 0); err != nil {
		t.Fatal(err)
	}
}

// TestFencingPartsAreReadAfterTheDataListings: start records are listed
// after the segment and tail listings and claims after the start records
// (an owner writes data after its cut, and its cut after its claim), so a
// cut written during a read is never missed while its epoch's objects are
// seen. Kills the mutant that lists the start records first.
func TestFencingPartsAreReadAfterTheDataListings(t *testing.T) {
	b, n := counting(t)
	r1 := fencing.NewStartRecord(1, 0, 4, 2, 0)
	putRecord(t, b, 3, r1)
	putRecord(t, b, 3, fencing.NewStartRecord(2, 1, 9, r1.StartSegment, 0))
	// A claim above the newest cut: claimed, not (yet) cut.
	if err := b.PutIfAbsent(context.Background(), blobtier.ClaimKey(3, 3), mustClaim(t, 3), 0); err != nil {
		t.Fatal(err)
	}
	for k := range n {
		delete(n, k)
	}
	lo := &listOrder{Bucket: b}
	v, err := bucketview.Read(context.Background(), lo, 3, bucketview.Options{Parts: bucketview.All | bucketview.Fencing})
	if err != nil {
		t.Fatal(err)
	}
	want := []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail, blobtier.KindStart, blobtier.KindClaim}
	if !slices.Equal(lo.kinds, want) {
		t.Fatalf("listing order %v, want %v", lo.kinds, want)
	}
	l, err := v.Lineage()
	if err != nil {
		t.Fatal(err)
	}
	if l.Newest() != 2 || v.HighestClaim != 3 || len(v.Starts) != 2 || len(v.ClaimObjects) != 3 {
		t.Fatalf("newest %d, highest claim %d, %d starts, %d claims", l.Newest(), v.HighestClaim, len(v.Starts), len(v.ClaimObjects))
	}
	if end, ok := l.End(1); !ok || end != 9 {
		t.Fatalf("end(1) = %d %v", end, ok)
	}
	// Claims are a listing only unless ReadClaims: 2 reads of start
	// records, 2 of the watermark and cursor (absent).
	if n[blobtier.OpGet] != 4 || n[blobtier.OpList] != 4 {
		t.Fatalf("requests %v", n)
	}
	if _, ok := v.Owner(); ok {
		t.Fatal("owner known without reading the claims")
	}
	v, err = bucketview.Read(context.Background(), b, 3, bucketview.Options{Parts: bucketview.Claims, ReadClaims: true})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := v.Owner(); !ok || c.Epoch != 3 {
		t.Fatalf("owner %+v %v", c, ok)
	}
	if _, err := v.Lineage(); err == nil {
		t.Fatal("a lineage from a view that did not read the start records")
	}
}

func mustClaim(t *testing.T, epoch uint64) []byte {
	t.Helper()
	c := fencing.Claim{Epoch: epoch, Shard: 3, Owner: "pod-x/boot", Nonce: fencing.NewNonce()}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFencingNoRecordsIsEpochZero: a bucket without claims or start records
// is the lineage of epoch 0, and a view without the fencing parts issues
// no fencing request.
func TestFencingNoRecordsIsEpochZero(t *testing.T) {
	b, n := counting(t)
	v, err := bucketview.Read(context.Background(), b, 1, bucketview.Options{Parts: bucketview.Fencing})
	if err != nil {
		t.Fatal(err)
	}
	l, err := v.Lineage()
	if err != nil || l.Newest() != 0 || !l.ValidSeq(0, 1<<40) || v.HighestClaim != 0 {
		t.Fatalf("lineage %+v err %v", l, err)
	}
	for k := range n {
		delete(n, k)
	}
	if _, err := bucketview.Read(context.Background(), b, 1, bucketview.Options{Parts: bucketview.All}); err != nil {
		t.Fatal(err)
	}
	if n[blobtier.OpList] != 2 {
		t.Fatalf("a view without fencing parts listed %d times", n[blobtier.OpList])
	}
}

// TestFencingDamagedRecordIsALineageError: a start record that does not
// decode, or names another epoch than its key, leaves no lineage (Read
// itself succeeds, so an operator's view can still show it).
func TestFencingDamagedRecordIsALineageError(t *testing.T) {
	b, _ := counting(t)
	r := fencing.NewStartRecord(2, 0, 4, 2, 0)
	rb, _ := r.Encode()
	if err := b.PutIfAbsent(context.Background(), blobtier.StartKey(1, 5), rb, 0); err != nil {
		t.Fatal(err)
	}
	v, err := bucketview.Read(context.Background(), b, 1, bucketview.Options{Parts: bucketview.StartRecords})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Lineage(); !errors.Is(err, fencing.ErrBadRecord) || len(v.Starts) != 1 || v.Starts[0].Err == nil {
		t.Fatalf("lineage error %v, starts %+v", err, v.Starts)
	}
}
