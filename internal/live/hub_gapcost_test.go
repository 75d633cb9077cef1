package live

import (
	"testing"
	"time"
)

// TestDefaultGapBoundsDeliveryCost: a publication costs each subscriber
// a fixed ~20 µs however few records it carries (one wake-up and one
// loopback write on the server, one wake-up and one read in the
// subscriber: BENCHMARKS.md, Live reads), so the default gap grows by at
// least 400 µs per subscriber — that fixed cost under 5% of one core —
// up to MaxGap, the bound on the latency a busy stream adds; one
// subscriber keeps MinGap.
func TestDefaultGapBoundsDeliveryCost(t *testing.T) {
	h := NewHub(nil, nil, nil, 1, 1)
	const fixed, share = 20 * time.Microsecond, 20 // 1/20 = 5%
	if g := h.gap(1); g != DefaultMinGap {
		t.Errorf("gap with one subscriber %v, want MinGap %v", g, DefaultMinGap)
	}
	for _, n := range []int{1, 5, 10, 50, 100, 125, 1000, 100000} {
		g := h.gap(n)
		if want := min(time.Duration(n)*fixed*share, DefaultMaxGap); g < want {
			t.Errorf("gap with %d subscribers %v, want ≥ %v (their fixed delivery cost under 5%% of a core)", n, g, want)
		}
		if g > max(DefaultMaxGap, DefaultMinGap) {
			t.Errorf("gap with %d subscribers %v, over MaxGap %v", n, g, DefaultMaxGap)
		}
	}
}
