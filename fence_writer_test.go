package bucketlog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/takeover"
)

// Writer fencing, the writer's side (docs/FORMAT.md, "Writer fencing"): two
// engines A and B with their own directories on one bucket.

func claims(t *testing.T, b blobtier.Bucket) []uint64 {
	t.Helper()
	var out []uint64
	for info, err := range b.List(ctxT(t), 0, blobtier.KindClaim) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info.Parsed.Epoch)
	}
	return out
}

// TestFenceTakeoverFencesTheOldOwner: B takes over from an empty disk
// (claim 2, hydrate, cut at A's shipped end); A's next tick finds the claim
// after its put and A is fenced: the tick fails, every write is refused
// with class fenced, and nothing more is shipped, cleaned up or reclaimed.
func TestFenceTakeoverFencesTheOldOwner(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	va, vb := newView(shared), newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), va, false))
	defer a.Close()
	if a.ship.Epoch() != 1 {
		t.Fatalf("A's epoch %d, want 1 (the first claim of a new bucket)", a.ship.Epoch())
	}
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, fenceOpts(t.TempDir(), vb, false))
	defer b.Close()
	if b.ship.Epoch() != 2 || b.store.Tip() != 3 {
		t.Fatalf("B: epoch %d tip %d, want epoch 2 over A's 3 events", b.ship.Epoch(), b.store.Tip())
	}
	// A acknowledges locally (async), ships, and is fenced by its HEAD.
	if _, err := a.Append(ctx, ev("x", 4)); err != nil {
		t.Fatal(err)
	}
	_, err := a.Ship(ctx, false)
	wantFenced(t, "A's tick after the takeover", err)
	var fe *FencedError
	errors.As(err, &fe)
	if fe.Epoch != 1 || fe.Claimant != 2 || fe.Shard != 0 {
		t.Fatalf("fenced error %+v", fe)
	}
	_, err = a.Append(ctx, ev("x", 5))
	wantFenced(t, "A's append", err)
	// The operator's view (GET /v1/status): A fenced at epoch 1, not ready;
	// B ready at epoch 2.
	if st := a.Status(); !st.Fenced || st.Epoch != 1 || st.Ready || st.State != "stopped" {
		t.Fatalf("A's status %+v, want fenced at epoch 1, stopped", st)
	}
	if st := b.Status(); st.Fenced || st.Epoch != 2 || !st.Ready {
		t.Fatalf("B's status %+v, want ready at epoch 2, not fenced", st)
	}
	_, err = a.Pull(ctx, "c", 1)
	wantFenced(t, "A's pull creating a consumer", err)
	va.resetCounts()
	_, err = a.Ship(ctx, true)
	wantFenced(t, "A's ship", err)
	if _, err := a.GC(ctx, GCRequest{}); err == nil {
		t.Fatal("A's GC ran while fenced")
	}
	if n := va.count(blobtier.OpPut, "") + va.count(blobtier.OpDelete, "") + va.count(blobtier.OpCAS, ""); n != 0 {
		t.Fatalf("a fenced writer wrote %d times to the bucket", n)
	}
	// B's history: the cut ends epoch 1 at 3; A's sequence 4 is not in it.
	// (Two events: A's zombie tail 4..4 occupies B's key for 4..4, and this
	// writer does not delete another epoch's object.)
	for i := 4; i <= 5; i++ {
		if _, err := b.Append(ctx, ev("y", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	got, lin, err := lineageOracle(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	if end, ok := lin.End(1); !ok || end != 3 {
		t.Fatalf("the cut ends epoch 1 at %d (%v), want 3", end, ok)
	}
	if y := ev("y", 4); got[4] != ident(y.ExecutionID, y.TransactionID, y.Payload) || len(got) != 5 {
		t.Fatalf("the lineage holds %v", got)
	}
}

// TestFenceSameDiskRestartIsOneHead: a restart on the same disk keeps its
// epoch and makes no claim: the fencing part of its open is one HEAD.
func TestFenceSameDiskRestartIsOneHead(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	v := newView(shared)
	dir := t.TempDir()
	a := mustOpen(t, fenceOpts(dir, v, false))
	a.Append(ctx, ev("x", 1))
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	a.Close()
	v.resetCounts()
	a = mustOpen(t, fenceOpts(dir, v, false))
	defer a.Close()
	if a.ship.Epoch() != 1 {
		t.Fatalf("epoch after a same-disk restart: %d", a.ship.Epoch())
	}
	// The claim side is one HEAD; reconcile reads the lineage (one LIST of
	// the start records and one GET per record) to judge the listed objects.
	heads, claimReqs, startReqs := v.count(blobtier.OpStat, "ep"), 0, 0
	for _, op := range blobtier.Ops {
		claimReqs += v.count(op, "ep")
		startReqs += v.count(op, "eps")
	}
	t.Logf("same-disk restart: claim requests %d (HEAD of the next claim %d), start-record requests %d; all requests of the open %d", claimReqs, heads, startReqs, v.total())
	if heads != 1 || claimReqs != 1 {
		t.Fatalf("same-disk restart made %d claim requests (%d HEADs), want 1 HEAD", claimReqs, heads)
	}
	if l, g := v.count(blobtier.OpList, "eps"), v.count(blobtier.OpGet, "eps"); l != 1 || g != 1 || startReqs != 2 {
		t.Fatalf("same-disk restart: %d start-record requests (%d LIST, %d GET), want 1 LIST + 1 GET of the one record", startReqs, l, g)
	}
	if got := claims(t, shared); len(got) != 1 {
		t.Fatalf("claims %v", got)
	}
}

// TestFenceRequestBudget: an idle shard makes no request; an active async
// tick is 1 PUT + 1 HEAD (+ the cursor object's GET + CAS); a takeover's
// fencing requests are counted.
func TestFenceRequestBudget(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	v := newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), v, false))
	defer a.Close()
	a.Append(ctx, ev("x", 1))
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	v.resetCounts()
	if err := a.ship.ShipTail(ctx); err != nil {
		t.Fatal(err)
	}
	if n := v.total(); n != 0 {
		t.Fatalf("an idle tick made %d requests", n)
	}
	a.Append(ctx, ev("x", 2))
	if err := a.ship.ShipTail(ctx); err != nil {
		t.Fatal(err)
	}
	tailPuts, heads := v.count(blobtier.OpPut, "tail"), v.count(blobtier.OpStat, "ep")
	t.Logf("active async tick: %d tail PUT, %d HEAD of the next claim; all: put %d get %d stat %d cas %d list %d",
		tailPuts, heads, v.count(blobtier.OpPut, ""), v.count(blobtier.OpGet, ""), v.count(blobtier.OpStat, ""), v.count(blobtier.OpCAS, ""), v.count(blobtier.OpList, ""))
	if tailPuts != 1 || heads != 1 {
		t.Fatalf("active tick: %d tail puts and %d HEADs, want 1 and 1", tailPuts, heads)
	}
	vb := newView(shared)
	b := mustOpen(t, fenceOpts(t.TempDir(), vb, false))
	defer b.Close()
	t.Logf("takeover: claim LIST %d PUT %d HEAD %d GET %d; start-record LIST %d PUT %d GET %d; the whole open: %d requests",
		vb.count(blobtier.OpList, "ep"), vb.count(blobtier.OpPut, "ep"), vb.count(blobtier.OpStat, "ep"), vb.count(blobtier.OpGet, "ep"),
		vb.count(blobtier.OpList, "eps"), vb.count(blobtier.OpPut, "eps"), vb.count(blobtier.OpGet, "eps"), vb.total())
	if vb.count(blobtier.OpList, "ep") != 2 || vb.count(blobtier.OpPut, "ep") != 1 || vb.count(blobtier.OpPut, "eps") != 1 || vb.count(blobtier.OpStat, "ep") != 1 {
		t.Fatal("the takeover's fencing requests are not 2 LIST + 1 claim PUT + 1 cut PUT + 1 HEAD")
	}
}

// TestFenceLegacyBucketFirstClaimIsEpochOne: a store written unfenced (a
// bucket before fencing, epoch 0 objects) adopted by a fencing writer
// claims epoch 1 with prev_end = its local tip; a new disk then takes over
// at epoch 2 and holds everything.
func TestFenceLegacyBucketFirstClaimIsEpochOne(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	legacy := newView(shared)
	legacy.noCAS = true
	dir := t.TempDir()
	a := mustOpen(t, fenceOpts(dir, legacy, false))
	for i := 1; i <= 3; i++ {
		a.Append(ctx, ev("x", i))
	}
	if _, err := a.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	if a.ship.Epoch() != 0 || len(claims(t, shared)) != 0 {
		t.Fatal("an unfenced writer claimed")
	}
	a.Close()
	if _, ok, _ := localseg.ReadOwner(localseg.OSFS{}, localseg.ShardDir(dir, 0)); ok {
		t.Fatal("an unfenced writer wrote owner.json")
	}
	a = mustOpen(t, fenceOpts(dir, newView(shared), false))
	if a.ship.Epoch() != 1 {
		t.Fatalf("the legacy store's first claim is epoch %d", a.ship.Epoch())
	}
	_, lin, err := lineageOracle(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	if end, ok := lin.End(0); !ok || end != 3 {
		t.Fatalf("claim 1 ends epoch 0 at %d (%v), want the local tip 3", end, ok)
	}
	a.Close()
	b := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	defer b.Close()
	if b.ship.Epoch() != 2 || b.store.Tip() != 3 {
		t.Fatalf("B: epoch %d tip %d", b.ship.Epoch(), b.store.Tip())
	}
}

// TestFenceUnfencedBucketWarnsOrRefuses: a bucket without CAS runs at epoch
// 0, and RequireFencing makes it a usage error before anything is written.
func TestFenceUnfencedBucketWarnsOrRefuses(t *testing.T) {
	v := newView(casBucket(t))
	v.noCAS = true
	o := fenceOpts(t.TempDir(), v, false)
	o.RequireFencing = true
	if _, err := Open(ctxT(t), o); !errors.Is(err, ErrUsage) {
		t.Fatalf("RequireFencing on a bucket without CAS: %v", err)
	}
	if n := v.total(); n != 0 {
		t.Fatalf("the refused open made %d requests", n)
	}
}

// TestFenceSixteenClaimantsRaceForOneEpoch: sixteen starters list the same
// highest claim and race for the next: exactly one wins it; every other is
// fenced (claim lost) and does not claim higher on its own.
func TestFenceSixteenClaimantsRaceForOneEpoch(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	a := mustOpen(t, fenceOpts(t.TempDir(), shared, false))
	a.Append(ctx, ev("x", 1))
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var listed sync.WaitGroup
	listed.Add(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		v := newView(shared)
		first := true
		var once sync.Mutex
		v.setHooks(func(op blobtier.Op, key string) error {
			if op == blobtier.OpPut && kindOf(key) == "ep" {
				once.Lock()
				if first {
					first = false
					listed.Done()
					listed.Wait() // every claimant has listed before any claims
				}
				once.Unlock()
			}
			return nil
		}, nil)
		root := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = takeover.Begin(ctx, takeover.Options{Shard: 0, Dir: filepath.Join(root, "shard-0000"), Bucket: v, Owner: fmt.Sprint("c", i),
				Hydrate: hydrateWith(v)})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, fencing.ErrFenced):
		default:
			t.Errorf("claimant %d: %v", i, err)
		}
	}
	if got := claims(t, shared); won != 1 || len(got) != 2 {
		t.Fatalf("%d claimants won; claims %v, want one winner of epoch 2", won, got)
	}
	a.Close()
}

func hydrateWith(b blobtier.Bucket) func(context.Context, string) (coldload.Report, error) {
	return func(ctx context.Context, dir string) (coldload.Report, error) {
		return coldload.Hydrate(ctx, b, 0, dir, coldload.Options{AllowEmpty: true})
	}
}

// TestFenceStaleOwnersDisk: a disk whose owner.json names a superseded
// epoch is refused by a one-shot writer (invalid state, exit 3, naming the
// claimant) with nothing changed, unless Takeover; a server moves it aside
// as shard-NNNN.fenced-<epoch> and takes over from the bucket.
func TestFenceStaleOwnersDisk(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	root := t.TempDir()
	a := mustOpen(t, fenceOpts(root, newView(shared), false))
	a.Append(ctx, ev("a", 1))
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	a.Append(ctx, ev("a", 2)) // shipped by Close
	a.Close()
	b := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
	b.Close()

	v := newView(shared)
	_, err := Open(ctx, fenceOpts(root, v, false))
	if !errors.Is(err, takeover.ErrStaleOwner) || Class(err) != ClassInvalidState || !strings.Contains(err.Error(), "--takeover") {
		t.Fatalf("one-shot open of a stale owner's disk: %v (class %s)", err, Class(err))
	}
	if puts := v.count(blobtier.OpPut, ""); puts != 0 {
		t.Fatalf("the refused open wrote %d objects", puts)
	}
	if o, ok, _ := localseg.ReadOwner(localseg.OSFS{}, localseg.ShardDir(root, 0)); !ok || o.Epoch != 1 {
		t.Fatalf("the refused open changed owner.json: %+v %v", o, ok)
	}
	for _, takeOver := range []bool{true, false} {
		o := fenceOpts(root, newView(shared), false)
		if takeOver {
			o.Takeover = true
		} else {
			o.NoBackground = false // a server
		}
		l := mustOpen(t, o)
		want := uint64(3)
		if !takeOver {
			want = 5
		}
		if l.ship.Epoch() != want || l.store.Tip() != 2 {
			t.Fatalf("takeover=%v: epoch %d tip %d, want epoch %d over the bucket's 2 events", takeOver, l.ship.Epoch(), l.store.Tip(), want)
		}
		l.Close()
		if takeOver {
			// make the disk stale again for the server's turn
			bb := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
			bb.Close()
		}
	}
	for _, e := range []uint64{1, 3} {
		aside := localseg.FencedDir(localseg.ShardDir(root, 0), e)
		if o, ok, err := localseg.ReadOwner(localseg.OSFS{}, aside); !ok || o.Epoch != e {
			t.Fatalf("%s: owner %+v ok=%v err=%v", aside, o, ok, err)
		}
	}
}

// TestFenceSyncAppendCost: what fencing adds to a synchronous append with
// a 20 ms bucket round trip: one HEAD per group commit. The latencies are
// logged (not asserted: they depend on the machine); the request counts are.
func TestFenceSyncAppendCost(t *testing.T) {
	const n = 5
	perAppend := map[bool]float64{}
	lat := map[bool]time.Duration{}
	for _, fenced := range []bool{false, true} {
		v := newView(casBucket(t))
		v.noCAS = !fenced
		a := mustOpen(t, fenceOpts(t.TempDir(), v, true))
		if err := (acked{}).append(t, a, ev("w", 0)); err != nil { // the first cursor object
			t.Fatal(err)
		}
		v.setHooks(func(blobtier.Op, string) error { time.Sleep(20 * time.Millisecond); return nil }, nil)
		v.resetCounts()
		start := time.Now()
		for i := 1; i <= n; i++ {
			if err := (acked{}).append(t, a, ev("w", i)); err != nil {
				t.Fatal(err)
			}
		}
		lat[fenced] = time.Since(start) / n
		perAppend[fenced] = float64(v.total()) / n
		v.setHooks(nil, nil)
		a.Close()
	}
	t.Logf("sync append with a 20 ms bucket round trip: unfenced %v (%.1f requests), fenced %v (%.1f requests)",
		lat[false], perAppend[false], lat[true], perAppend[true])
	if perAppend[true]-perAppend[false] != 1 {
		t.Fatalf("fencing adds %.1f requests per synchronous append, want 1 (the HEAD)", perAppend[true]-perAppend[false])
	}
}
