package coldload

import (
	"slices"
	"testing"
)

// TestPlausibleFirsts: a first-event hint is kept only above the reclaim
// base, below the first local event, and in order with every other hint;
// two hints out of order are both dropped.
func TestPlausibleFirsts(t *testing.T) {
	for _, c := range []struct {
		name       string
		in         []uint64
		base, next uint64
		want       []uint64
	}{
		{"all fit", []uint64{11, 21, 31}, 10, 41, []uint64{11, 21, 31}},
		{"none learned", []uint64{0, 11, 0}, 0, 30, []uint64{0, 11, 0}},
		{"at the base", []uint64{10, 21}, 10, 41, []uint64{0, 21}},
		{"at the first local event", []uint64{11, 41}, 10, 41, []uint64{11, 0}},
		{"past the first local event", []uint64{11, 50}, 10, 41, []uint64{11, 0}},
		{"below the base, after a good one", []uint64{21, 5}, 10, 41, []uint64{21, 0}},
		{"out of order", []uint64{11, 31, 21, 35}, 10, 41, []uint64{11, 0, 0, 35}},
		{"equal", []uint64{11, 21, 21}, 10, 41, []uint64{11, 0, 0}},
		{"one too high drops all it passes", []uint64{39, 21, 31}, 10, 41, []uint64{0, 0, 0}},
	} {
		got := slices.Clone(c.in)
		plausibleFirsts(got, c.base, c.next)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: plausibleFirsts(%v, %d, %d) = %v, want %v", c.name, c.in, c.base, c.next, got, c.want)
		}
	}
}
