package coldload

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

func TestWindowKeepsOnlyWhatLaterObjectsMayRepeat(t *testing.T) {
	var w window
	for s := uint64(5); s <= 9; s++ {
		w.add(s, ref{key: "k" + strconv.FormatUint(s, 10)})
	}
	if r, ok := w.get(7); !ok || r.key != "k7" {
		t.Fatalf("get 7: %+v %v", r, ok)
	}
	w.trim(8)
	if _, ok := w.get(7); ok {
		t.Fatal("7 survived a trim below 8")
	}
	if r, ok := w.get(9); !ok || r.key != "k9" {
		t.Fatalf("get 9 after trim: %+v %v", r, ok)
	}
	w.trim(100)
	if len(w.refs) != 0 {
		t.Fatalf("window holds %d after trimming past its end", len(w.refs))
	}
	w.add(100, ref{key: "k100"})
	if r, ok := w.get(100); !ok || r.key != "k100" {
		t.Fatalf("get 100: %+v %v", r, ok)
	}
	if _, ok := w.get(99); ok {
		t.Fatal("99 found in a window starting at 100")
	}
}

func TestTailsOverlappingAndCoverage(t *testing.T) {
	p := &plan{tails: []tailObj{
		{first: 1, last: 50, key: "a"},
		{first: 3, last: 4, key: "b"},
		{first: 10, last: 12, key: "c"},
		{first: 13, last: 20, key: "d"},
		{first: 30, last: 31, key: "e"},
	}}
	p.maxLast = make([]uint64, len(p.tails))
	var hi uint64
	for i, tl := range p.tails {
		hi = max(hi, tl.last)
		p.maxLast[i] = hi
	}
	names := func(idx []int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, p.tails[i].key)
		}
		return out
	}
	cases := []struct {
		lo, hi uint64
		want   []string
	}{
		{5, 9, []string{"a"}},
		{12, 13, []string{"a", "c", "d"}},
		{21, 29, []string{"a"}},
		{51, 60, nil},
		{4, 4, []string{"a", "b"}},
	}
	for _, c := range cases {
		if got := names(p.tailsOverlapping(c.lo, c.hi)); !slices.Equal(got, c.want) {
			t.Errorf("overlapping %d..%d: %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if got := p.tailCoverage(1); got != 50 {
		t.Errorf("coverage from 1: %d, want 50", got)
	}
	if got := p.tailCoverage(60); got != 59 {
		t.Errorf("coverage from 60: %d, want 59 (nothing)", got)
	}
}

func TestErrorMessagesAndMatching(t *testing.T) {
	g := &GapError{Shard: 2, FromSegment: 3, ToSegment: 4, FromSeq: 41, ToSeq: 60, After: "A", Before: "B", CoveredByTail: true}
	if want := "coldload: shard 2: segments 3..4 missing (sequences 41..60) after A before B; tail objects cover the missing sequences (AllowPartial recovers them)"; g.Error() != want {
		t.Errorf("gap message %q", g.Error())
	}
	if !errors.Is(g, ErrGap) {
		t.Error("GapError does not match ErrGap")
	}
	oe := &ObjectError{Key: "K", Err: corruptf("bad")}
	if !errors.Is(oe, ErrCorrupt) || !errors.Is(oe, localseg.ErrCorrupt) {
		t.Error("a content error does not match both corruption sentinels")
	}
	if errors.Is(&ObjectError{Key: "K", Err: errors.New("timeout")}, ErrCorrupt) {
		t.Error("an I/O error matches ErrCorrupt")
	}
}

// FuzzDecodeTail feeds arbitrary bytes as a tail object: decodeTail must
// never panic, and whatever it accepts holds exactly the key's events, in
// order, covering the whole object.
func FuzzDecodeTail(f *testing.F) {
	var seed []byte
	for s := uint64(3); s <= 5; s++ {
		var err error
		seed, err = localseg.EncodeFrame(seed, &localseg.Frame{Kind: localseg.KindEvent, Seq: s, ExecutionID: "1", TransactionID: "t", Payload: "p"})
		if err != nil {
			f.Skip("frame encoder unavailable:", err)
		}
	}
	f.Add(seed, uint64(3), uint64(5))
	f.Add(seed[:len(seed)-1], uint64(3), uint64(5))
	f.Add([]byte{}, uint64(1), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, first, last uint64) {
		if first == 0 || first > last || last-first > 1<<16 {
			return
		}
		out, err := decodeTail(tailObj{first: first, last: last, key: "k"}, data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("rejection %v does not match ErrCorrupt", err)
			}
			return
		}
		next, n := first, 0
		for _, d := range out {
			n += len(d.raw)
			if d.f.Kind == localseg.KindEvent {
				if d.f.Seq != next {
					t.Fatalf("event %d, want %d", d.f.Seq, next)
				}
				next++
			}
		}
		if next-1 != last || n != len(data) {
			t.Fatalf("accepted events %d..%d over %d of %d bytes; key %d..%d", first, next-1, n, len(data), first, last)
		}
	})
}
