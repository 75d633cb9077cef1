package localseg

import (
	"fmt"
	"runtime"
	"testing"
)

// TestTxWindowMemoryPerEntry measures the heap a full window costs per
// entry (the figure doc.go and README state) and that it stays bounded
// when ids keep arriving past the window.
func TestTxWindowMemoryPerEntry(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = DefaultTransactionWindow
	before := heap()
	w := newTxWindow(0, false)
	for i := range 3 * n { // three windows' worth: evictions included
		v := validEvent{exec: "e", txn: fmt.Sprintf("transaction-%d", i), payload: "p"}
		w.add(&v, uint64(i+1))
	}
	after := heap()
	if w.Len() != n {
		t.Fatalf("window holds %d ids, want %d", w.Len(), n)
	}
	for i := range 3 * n { // exactly the newest n are found, at their sequences
		v := validEvent{exec: "e", txn: fmt.Sprintf("transaction-%d", i), payload: "p"}
		e, ok := w.lookup(&v)
		if ok != (i >= 2*n) || ok && e.seq != uint64(i+1) {
			t.Fatalf("id %d: %+v %v", i, e, ok)
		}
	}
	per := float64(after-before) / n
	t.Logf("transaction window: %d entries, %.1f bytes an entry (%.1f MB)", n, per, float64(after-before)/1e6)
	if per > 48 {
		t.Fatalf("%.1f bytes an entry, above the 48 the docs allow", per)
	}
	runtime.KeepAlive(w)
}

// BenchmarkTxWindowAppendPath is the window's share of an append: hash the
// id and a 256-byte payload (outside the mutex), look the id up and add it
// (under the mutex), with a full default window evicting its oldest.
func BenchmarkTxWindowAppendPath(b *testing.B) {
	w := newTxWindow(0, false)
	ids := make([]string, DefaultTransactionWindow+1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("transaction-%d", i)
	}
	payload := string(make([]byte, 256))
	seq := uint64(0)
	for b.Loop() {
		v := validEvent{exec: "e", txn: ids[seq%uint64(len(ids))], payload: payload}
		w.hash(&v)
		if _, ok := w.lookup(&v); ok {
			b.Fatal("a distinct id found")
		}
		seq++
		w.add(&v, seq)
	}
}

// TestTxWindowAgainstModel drives small windows (many probe collisions,
// evictions, repeated ids as a log written without de-duplication holds
// them, reclaims) and checks every lookup against a plain model: the
// newest of the last max events with that id.
func TestTxWindowAgainstModel(t *testing.T) {
	for _, max := range []int{1, 2, 7, 64, 100} {
		w := newTxWindow(max, false)
		var log []string // id of sequence i+1
		lo := uint64(1)  // first sequence the model keeps (reclaims move it)
		check := func(step int) {
			for id := range 40 {
				txn := fmt.Sprint("id-", id)
				want := uint64(0)
				for s := uint64(len(log)); s >= lo && s > uint64(len(log))-uint64(min(max, len(log))); s-- {
					if log[s-1] == txn {
						want = s
						break
					}
				}
				v := validEvent{exec: "e", txn: txn, payload: "p"}
				e, ok := w.lookup(&v)
				if ok != (want > 0) || ok && e.seq != want {
					t.Fatalf("max %d step %d: %s found %v at %d, want %d", max, step, txn, ok, e.seq, want)
				}
			}
		}
		for step := range 3000 {
			if step%500 == 499 {
				through := uint64(len(log)) - uint64(step%3) // a reclaim
				w.dropThrough(through)
				lo = max64(lo, through+1)
			}
			txn := fmt.Sprint("id-", (step*7919)%37)
			log = append(log, txn)
			v := validEvent{exec: "e", txn: txn, payload: "p"}
			w.add(&v, uint64(len(log)))
			if step%17 == 0 {
				check(step)
			}
		}
		check(3000)
	}
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
