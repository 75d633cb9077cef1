package harness

import (
	"errors"
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is not NaN")
	}
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Error("Median reordered its input (the JSON keeps repetitions in the order taken)")
	}
}

// A ratio is never made from a missing side.
func TestRatioRefusesFailedSide(t *testing.T) {
	ok := Measured("s", "a", "x/s", "x/s", []float64{10, 20, 30}, "")
	den := Measured("s", "b", "x/s", "x/s", []float64{5}, "")
	if r := Ratio("s", "a/b", ok, den, ""); r.Err != "" || r.Value != 4 {
		t.Fatalf("got %+v, want 4", r)
	}
	bad := Failed("s", "b", "x/s", errors.New("boom"))
	if r := Ratio("s", "a/b", ok, bad, ""); r.Err == "" || r.Value != 0 {
		t.Fatalf("ratio over a failed row: %+v", r)
	}
	if r := Ratio("s", "a/b", ok, Row{}, ""); r.Err == "" {
		t.Fatalf("ratio over a missing row: %+v", r)
	}
}

func TestSelect(t *testing.T) {
	all := Sections()
	if len(all) != 0 {
		t.Skip("sections registered by an import; this test runs on an empty registry")
	}
	Register(Section{Name: "b", Order: 2, Default: true})
	Register(Section{Name: "a", Order: 1, Default: true})
	Register(Section{Name: "c", Order: 3})
	got, err := Select("")
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("default selection: %v %v", got, err)
	}
	got, err = Select("c,a")
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
		t.Fatalf("named selection not in run order: %v %v", got, err)
	}
	if got, _ := Select("all"); len(got) != 3 {
		t.Fatalf("all: %v", got)
	}
	if _, err := Select("a,nope"); err == nil {
		t.Fatal("unknown section accepted")
	}
}
