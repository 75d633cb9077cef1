package sections

import (
	"math"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestCostDollarsPricesEachMethodOnce: PUT, POST and LIST at class A,
// GET and HEAD at class B, DELETE free, scaled to the month.
func TestCostDollarsPricesEachMethodOnce(t *testing.T) {
	c := costCell{perMonth: 2, http: map[string]int64{"PUT": 1000, "POST": 500, "LIST": 500, "GET": 1000, "HEAD": 1000, "DELETE": 7000}}
	a, b, total := c.dollars()
	wantA := 2 * 2000.0 / 1000 * priceClassA
	wantB := 2 * 2000.0 / 1000 * priceClassB
	if math.Abs(a-wantA) > 1e-12 || math.Abs(b-wantB) > 1e-12 || math.Abs(total-wantA-wantB) > 1e-12 {
		t.Fatalf("dollars() = %v, %v, %v; want %v, %v, %v", a, b, total, wantA, wantB, wantA+wantB)
	}
}

func TestPercentile(t *testing.T) {
	var xs []time.Duration
	for i := 100; i >= 1; i-- {
		xs = append(xs, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(xs, 0.5); got != 51*time.Millisecond {
		t.Fatalf("p50 of 1..100 ms = %v", got)
	}
	if got := percentile(xs, 0.99); got != 100*time.Millisecond {
		t.Fatalf("p99 of 1..100 ms = %v", got)
	}
	if xs[0] != 100*time.Millisecond {
		t.Fatal("percentile sorted its input in place")
	}
}

// TestCheckBilledRefusesUnmatchedWrites: a blobtier write that did not
// become exactly one HTTP PUT (a multipart upload, a retry) fails the cell.
func TestCheckBilledRefusesUnmatchedWrites(t *testing.T) {
	c := costCell{http: map[string]int64{"PUT": 3, "LIST": 1}}
	c.counts.ByOp = map[blobtier.Op]int64{blobtier.OpPut: 2, blobtier.OpCAS: 1, blobtier.OpList: 1}
	if err := checkBilled(c); err != nil {
		t.Fatalf("matching counts refused: %v", err)
	}
	c.http["POST"] = 1
	if checkBilled(c) == nil {
		t.Fatal("a POST (multipart upload) was not refused")
	}
	c.http["POST"], c.http["PUT"] = 0, 4
	if checkBilled(c) == nil {
		t.Fatal("4 HTTP PUTs for 3 writes were not refused")
	}
}
