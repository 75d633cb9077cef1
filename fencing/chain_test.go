package fencing

import (
	"errors"
	"slices"
	"testing"
)

func rec(epoch, prev, prevEnd, highestSeg uint64) StartRecord {
	return NewStartRecord(epoch, prev, prevEnd, highestSeg, 0)
}

func TestChainEmptyIsEpochZero(t *testing.T) {
	l, err := Chain(nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Newest() != 0 || !l.OnChain(0) || l.OnChain(1) || !l.ValidSeq(0, 1<<40) || l.SkipSegment(0, 99) {
		t.Fatalf("empty lineage: newest %d", l.Newest())
	}
	if _, ended := l.End(0); ended {
		t.Fatal("epoch 0 ended without a cut")
	}
}

func TestChainFollowsPrevEpochNotEpochNumbers(t *testing.T) {
	// X claimed 2 and cut after 1 at 100; Y claimed 3 and chained to 1 (it
	// never saw X's cut) at 80: X's cut is off the chain, epoch 1 ends at 80.
	r1 := rec(1, 0, 10, 3)
	x := rec(2, 1, 100, r1.StartSegment)
	y := rec(3, 1, 80, r1.StartSegment)
	l, err := Chain([]StartRecord{y, x, r1})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Newest(); got != 3 {
		t.Fatalf("newest %d, want 3", got)
	}
	if !slices.Equal(l.OffChain(), []uint64{2}) || l.OnChain(2) {
		t.Fatalf("off chain %v", l.OffChain())
	}
	if end, ok := l.End(1); !ok || end != 80 {
		t.Fatalf("end(1) = %d, %v; want 80 (Y's cut, not X's)", end, ok)
	}
	if end, ok := l.End(0); !ok || end != 10 {
		t.Fatalf("end(0) = %d, %v", end, ok)
	}
	for _, c := range []struct {
		e, seq uint64
		want   bool
	}{{0, 10, true}, {0, 11, false}, {1, 80, true}, {1, 81, false}, {2, 90, false}, {3, 81, true}, {3, 1 << 30, true}} {
		if got := l.ValidSeq(c.e, c.seq); got != c.want {
			t.Errorf("ValidSeq(%d, %d) = %v, want %v", c.e, c.seq, got, c.want)
		}
	}
	// Segment fences: epoch 1's seals at or above Y's fence are a zombie's.
	if l.SkipSegment(1, y.FenceSegment-1) || !l.SkipSegment(1, y.FenceSegment) || !l.SkipSegment(2, 1) || l.SkipSegment(3, y.StartSegment+5) {
		t.Fatal("segment fence rule")
	}
	if !l.Gap(y.FenceSegment) || !l.Gap(y.StartSegment-1) || l.Gap(y.StartSegment) {
		t.Fatal("gap rule")
	}
	if l.HighestStartSegment() != x.StartSegment {
		t.Fatalf("highest start segment %d", l.HighestStartSegment())
	}
}

func TestChainRefusesBrokenAndContradictoryRecords(t *testing.T) {
	r1 := rec(1, 0, 10, 3)
	r3 := rec(3, 2, 20, r1.StartSegment)
	if _, err := Chain([]StartRecord{r1, r3}); !errors.Is(err, ErrBrokenChain) {
		t.Fatalf("missing epoch 2: %v", err)
	}
	if _, err := Chain([]StartRecord{r1, r1}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("duplicate epoch: %v", err)
	}
	r2 := rec(2, 1, 5, r1.StartSegment) // ends epoch 1 below its start 11
	if _, err := Chain([]StartRecord{r1, r2}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("end below start: %v", err)
	}
	// A cut's fence lies at or above every start segment it saw, its
	// predecessor's included: gaps never overlap.
	if _, err := Chain([]StartRecord{r1, rec(2, 1, 20, r1.StartSegment-1)}); err != nil {
		t.Fatalf("fence at the predecessor's start segment: %v", err)
	}
	low := rec(2, 1, 20, r1.StartSegment-2)
	if _, err := Chain([]StartRecord{r1, low}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("fence below the predecessor's start segment: %v", err)
	}
	bad := r1
	bad.StartSegment++
	if _, err := Chain([]StartRecord{bad}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("stride: %v", err)
	}
}

func TestRecordsDecodeStrictly(t *testing.T) {
	r := rec(7, 6, 1200, 13)
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeStartRecord(b); err != nil || got != r {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	c := Claim{Epoch: 7, Shard: 3, Owner: "h/boot", Nonce: NewNonce()}
	cb, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeClaim(cb); err != nil || got != c {
		t.Fatalf("claim round trip: %+v, %v", got, err)
	}
	for name, body := range map[string]string{
		"not json":          `{`,
		"missing prev_end":  `{"epoch":7,"prev_epoch":6,"start_seq":1201,"fence_segment":14,"start_segment":1048590}`,
		"prev above epoch":  `{"epoch":7,"prev_epoch":8,"prev_end_seq":1200,"start_seq":1201,"fence_segment":14,"start_segment":1048590}`,
		"start not end+1":   `{"epoch":7,"prev_epoch":6,"prev_end_seq":1200,"start_seq":1300,"fence_segment":14,"start_segment":1048590}`,
		"negative":          `{"epoch":-7,"prev_epoch":6,"prev_end_seq":1200,"start_seq":1201,"fence_segment":14,"start_segment":1048590}`,
		"watermark too far": `{"epoch":7,"prev_epoch":6,"prev_end_seq":1200,"start_seq":1201,"fence_segment":14,"start_segment":1048590,"watermark_seq":1201}`,
	} {
		if _, err := DecodeStartRecord([]byte(body)); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v, want ErrBadRecord", name, err)
		}
	}
	if _, err := DecodeStartRecord([]byte(`{"epoch":7,"prev_epoch":6,"prev_end_seq":1200,"start_seq":1201,"fence_segment":14,"start_segment":1048590,"later":"x"}`)); err != nil {
		t.Errorf("an unknown field must be tolerated: %v", err)
	}
	for name, body := range map[string]string{
		"epoch 0":   `{"epoch":0,"shard":1,"nonce":"00112233445566778899aabbccddeeff"}`,
		"no nonce":  `{"epoch":1,"shard":1}`,
		"bad nonce": `{"epoch":1,"shard":1,"nonce":"zz112233445566778899aabbccddeeff"}`,
	} {
		if _, err := DecodeClaim([]byte(body)); !errors.Is(err, ErrBadRecord) {
			t.Errorf("claim %s: %v, want ErrBadRecord", name, err)
		}
	}
}
