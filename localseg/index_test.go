package localseg

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// buildIndex indexes n events of ~frame bytes each over execs executions
// (in random interleaving), in segments of segBytes, as the store would.
func buildIndex(n, execs int, frame, segBytes int64) (*index, map[string][]uint64, map[uint64]loc) {
	x := newIndex()
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string][]uint64{}
	locs := map[uint64]loc{}
	seg, off := uint64(1), int64(0)
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if off+frame > segBytes {
			seg, off = seg+1, 0
		}
		exec := fmt.Sprintf("%019d", 320816801799737344+rng.IntN(execs))
		x.add(seg, seq, off, exec)
		want[exec] = append(want[exec], seq)
		if seq%97 == 0 {
			locs[seq] = loc{seq: seq, seg: seg, off: off}
		}
		off += frame + int64(rng.IntN(8))
	}
	return x, want, locs
}

// TestIndexBytesPerEvent: the read index stays within 8 bytes an event
// (locations and per-execution lists both counted, with the maps'
// overhead) at 1M events of 256-byte payloads over 10k executions.
func TestIndexBytesPerEvent(t *testing.T) {
	n, execs := 1_000_000, 10_000
	if testing.Short() {
		n, execs = 100_000, 1_000 // the same events per execution
	}
	x, want, locs := buildIndex(n, execs, 330, DefaultSegmentMaxBytes)
	per := float64(x.bytes()) / float64(n)
	t.Logf("%d events over %d executions: %d index bytes, %.2f per event", n, execs, x.bytes(), per)
	if per > 8 {
		t.Fatalf("%.2f index bytes per event, want at most 8", per)
	}
	for seq, l := range locs {
		got, ok := x.locate(seq)
		if !ok || got.seg != l.seg || got.off != l.off {
			t.Fatalf("locate %d = %+v %v, want %+v", seq, got, ok, l)
		}
	}
	if _, ok := x.locate(uint64(n) + 1); ok {
		t.Fatal("located a sequence beyond the last")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for exec, seqs := range want {
		if checked++; checked > 200 {
			break
		}
		l := x.execs[exec]
		for range 5 {
			from := uint64(rng.IntN(n + 1))
			limit := rng.IntN(300)
			i, _ := slices.BinarySearch(seqs, from+1)
			wantPage := seqs[i:min(len(seqs), i+limit)]
			got, count := l.after(from, limit)
			if count != uint64(len(seqs)-i) || !slices.Equal(got, wantPage) && len(wantPage)+len(got) > 0 {
				t.Fatalf("%s after %d limit %d: %v (%d), want %v (%d)", exec, from, limit, got, count, wantPage, len(seqs)-i)
			}
		}
	}
}

func TestIndexTrim(t *testing.T) {
	x, want, _ := buildIndex(50_000, 300, 300, 64<<10)
	// Reclaim through the segment holding sequence 20000.
	l, _ := x.locate(20000)
	last := x.segs[slices.IndexFunc(x.segs, func(s segIndex) bool { return s.id == l.seg })]
	base := last.first + uint64(last.n()) - 1
	x.trim(l.seg, base)
	if x.segs[0].id != l.seg+1 || x.segs[0].first != base+1 {
		t.Fatalf("first segment after trim %+v", x.segs[0])
	}
	if _, ok := x.locate(base); ok {
		t.Fatal("a trimmed sequence is still located")
	}
	for exec, seqs := range want {
		i, _ := slices.BinarySearch(seqs, base+1)
		rest := seqs[i:]
		l := x.execs[exec]
		if len(rest) == 0 {
			if l != nil {
				t.Fatalf("%s: list kept with nothing above the base", exec)
			}
			continue
		}
		got, count := l.after(0, len(rest)+1)
		if count != uint64(len(rest)) || !slices.Equal(got, rest) {
			t.Fatalf("%s after trim: %d/%d", exec, len(got), len(rest))
		}
	}
}

func TestIndexWideOffsets(t *testing.T) {
	var si segIndex
	si.w = 3
	offs := []int64{0, 100, 1<<24 - 1, 1 << 24, 40 << 20}
	for _, o := range offs {
		si.put(o)
	}
	for i, o := range offs {
		if si.off(i) != o {
			t.Fatalf("offset %d = %d, want %d", i, si.off(i), o)
		}
	}
}
