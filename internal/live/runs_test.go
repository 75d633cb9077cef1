package live

import (
	"bytes"
	"slices"
	"testing"
)

// TestRunsJoinOnlyAdjacentFramesOfOneBlock: Runs joins two frames only
// when the second follows the first in the same block; items taken out
// of order, or from two blocks at matching offsets, stay separate runs
// that spell exactly their frames.
func TestRunsJoinOnlyAdjacentFramesOfOneBlock(t *testing.T) {
	items := func(fs ...string) []Item {
		var out []Item
		for i, f := range fs {
			out = append(out, Item{Seq: uint64(i + 1), Frame: []byte(f)})
		}
		return out
	}
	a, b := pack(items("aa", "bb", "cc")), pack(items("xx", "yy"))
	for _, tc := range []struct {
		items []Item
		runs  []string
	}{
		{a, []string{"aabbcc"}},
		{a[1:], []string{"bbcc"}},
		{[]Item{a[0], a[2]}, []string{"aa", "cc"}},
		{[]Item{a[0], b[1]}, []string{"aa", "yy"}},
		{[]Item{a[2], b[0], b[1]}, []string{"cc", "xxyy"}},
		{items("p", "q"), []string{"p", "q"}},
		{pack(items("", "")), []string{"", ""}},
	} {
		var got []string
		for run := range Runs(tc.items) {
			got = append(got, string(run))
		}
		if !slices.Equal(got, tc.runs) {
			t.Errorf("runs %q, want %q", got, tc.runs)
		}
	}
	if r := slices.Collect(Runs(a)); !bytes.Equal(r[0], []byte("aabbcc")) || &r[0][0] != &a[0].Frame[0] {
		t.Error("a run is not the block itself")
	}
}
