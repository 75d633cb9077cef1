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
	if w.Len() != n || len(w.ids) != n {
		t.Fatalf("window holds %d ids, %d map entries, want %d", w.Len(), len(w.ids), n)
	}
	per := float64(after-before) / n
	t.Logf("transaction window: %d entries, %.1f bytes an entry (%.1f MB)", n, per, float64(after-before)/1e6)
	if per > 160 {
		t.Fatalf("%.1f bytes an entry, above the 160 the docs allow", per)
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
