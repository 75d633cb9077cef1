package bucketlog

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

func (v *writerView) summary() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var s []string
	for k, c := range v.counts {
		s = append(s, fmt.Sprintf("%s=%d", k, c))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// TestDurableSeqRequestBudget: committing rw.durable_seq costs at most one
// GET and one CAS of rw in a pass whose contiguous durable end moved (a
// seal), and nothing on an idle shard or an active async tick (still 1
// tail PUT + 1 HEAD, no rw request).
func TestDurableSeqRequestBudget(t *testing.T) {
	ctx := ctxT(t)
	v := newView(casBucket(t))
	a := mustOpen(t, fenceOpts(t.TempDir(), v, false))
	defer a.Close()
	a.Append(ctx, ev("x", 1))
	a.Append(ctx, ev("x", 2))
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	v.resetCounts()
	if _, err := a.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("seal pass: %d requests: %s", v.total(), v.summary())
	if g, c := v.count(blobtier.OpGet, "rw"), v.count(blobtier.OpCAS, "rw"); g > 1 || c != 1 {
		t.Fatalf("seal pass: %d GET and %d CAS of rw, want at most 1 and 1", g, c)
	}
	v.resetCounts()
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := v.total(); n != 0 {
		t.Fatalf("an idle pass after the cleanup made %d requests: %s", n, v.summary())
	}
	a.Append(ctx, ev("x", 3))
	if err := a.ship.ShipTail(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("active async tick: %s", v.summary())
	if v.count(blobtier.OpPut, "tail") != 1 || v.count(blobtier.OpStat, "ep") != 1 || v.count(blobtier.OpGet, "rw")+v.count(blobtier.OpCAS, "rw") != 0 {
		t.Fatalf("active tick: %s", v.summary())
	}
}
