package bucketlog

import (
	"errors"
	"maps"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// The request budget of a same-disk restart and of a takeover, counted
// exactly by operation and kind of key (docs/FORMAT.md, "Writer fencing",
// request budget; BENCHMARKS.md). Any request added to either path fails
// these tests, and so does any request removed without updating them.

// budgetShard leaves a shard with one sealed segment (events 1..3) and one
// tail object (event 4) in the bucket, written by an owner at epoch 1
// whose directory is returned (closed).
func budgetShard(t *testing.T, v *writerView) string {
	t.Helper()
	ctx := ctxT(t)
	dir := t.TempDir()
	a := mustOpen(t, fenceOpts(dir, v, false))
	for i := 1; i <= 3; i++ {
		a.Append(ctx, ev("x", i))
	}
	if _, err := a.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	a.Append(ctx, ev("x", 4))
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	a.Close()
	return dir
}

func wantRequests(t *testing.T, what string, v *writerView, want map[string]int) {
	t.Helper()
	v.mu.Lock()
	got := maps.Clone(v.counts)
	v.mu.Unlock()
	t.Logf("%s: %d requests: %s", what, v.total(), v.summary())
	if !maps.Equal(got, want) {
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s: %q: %d requests, want %d", what, k, got[k], n)
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: %q: %d requests, want none", what, k, n)
			}
		}
	}
}

// TestFenceSameDiskRestartRequestsExactly: the only fencing HEAD of a
// same-disk restart is the one of ep.<s>.<E+1>. The rest is the start-up
// reconcile (docs/FORMAT.md §7.4): the watermark, the cursor object, one
// listing each of tail objects, segments and start records, the start
// record, the metadata of the retained segment (which also carries its
// epoch for the lineage) and the read-back of the newest tail object
// (which carries its epoch too).
func TestFenceSameDiskRestartRequestsExactly(t *testing.T) {
	v := newView(casBucket(t))
	dir := budgetShard(t, v)
	v.resetCounts()
	a := mustOpen(t, fenceOpts(dir, v, false))
	defer a.Close()
	if a.ship.Epoch() != 1 {
		t.Fatalf("epoch after a same-disk restart: %d", a.ship.Epoch())
	}
	wantRequests(t, "same-disk restart", v, map[string]int{
		"stat ep": 1, // ep.<s>.<E+1>: the restart's one fencing request
		"get rw":  1, "get cur": 1,
		"list tail": 1, "list seg": 1, "list eps": 1,
		"get eps":  1, // the one start record (the chain)
		"stat seg": 1, // the retained segment's metadata (SPEC §7's check)
		"get tail": 1, // the newest tail object, compared with the local log
	})
}

// TestFenceTakeoverRequestsExactly: a takeover from an empty disk lists
// the claims twice (before and after its claim) and the start records
// before its claim (step 1: M counts a start record whose claim vanished), puts its claim and its
// cut, HEADs the next claim once, bumps rw and cur (GET + CAS each), and
// reads the bucket once after its claim: the cold load's reads, whose
// listing of start records is the chain, L, prev_end and the fence, and
// which the start-up reconcile takes over instead of listing again (it
// only reads the newest tail object back, as on every start).
func TestFenceTakeoverRequestsExactly(t *testing.T) {
	shared := casBucket(t)
	budgetShard(t, newView(shared))
	vb := newView(shared)
	b := mustOpen(t, fenceOpts(t.TempDir(), vb, false))
	defer b.Close()
	if b.ship.Epoch() != 2 || b.store.Tip() != 4 {
		t.Fatalf("B: epoch %d tip %d", b.ship.Epoch(), b.store.Tip())
	}
	wantRequests(t, "takeover", vb, map[string]int{
		"list ep": 2, "put ep": 1, "put eps": 1, "stat ep": 1,
		"list eps": 2,                                          // step 1 (M counts a start record whose claim vanished), then the post-claim listing
		"get rw":   2, "cas rw": 1, "get cur": 2, "cas cur": 1, // the bumps, then the cold load's reads
		"list seg": 1, "list tail": 1, "get eps": 1, // the one post-claim listing
		"get seg": 1, "get tail": 2, // the cold load; the tail object again: reconcile's read-back
		"stat seg": 1, // reconcile's check of the hydrated segment's metadata
	})
}

// TestFenceResumedTakeoverRequestsExactly: a takeover that crashed between
// its claim and its cut, restarted on the same disk: no new claim (one HEAD
// of the next claim finds none), one listing of the claims (a higher claim
// would fence it), the start-up checks' one read of the bucket (which the
// cut takes its chain and fence from), the cut it had not written, and the
// HEAD after the cut. This is the restart that writes E's missing start
// record: the only same-disk restart that costs more than one HEAD of
// fencing.
func TestFenceResumedTakeoverRequestsExactly(t *testing.T) {
	shared := casBucket(t)
	budgetShard(t, newView(shared))
	vb := newView(shared)
	vb.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "eps") {
			return errors.New("injected: crash before the cut")
		}
		return nil
	}, nil)
	dir := t.TempDir()
	if _, err := Open(ctxT(t), fenceOpts(dir, vb, false)); err == nil {
		t.Fatal("the open survived its crash")
	}
	vb.setHooks(nil, nil)
	vb.resetCounts()
	b := mustOpen(t, fenceOpts(dir, vb, false))
	defer b.Close()
	if b.ship.Epoch() != 2 || b.store.Tip() != 4 {
		t.Fatalf("B: epoch %d tip %d", b.ship.Epoch(), b.store.Tip())
	}
	wantRequests(t, "resumed takeover", vb, map[string]int{
		"stat ep": 2,               // ep.<s>.<E+1> at the start, and again after the cut
		"list ep": 1,               // a higher claim would fence it (step 4)
		"get rw":  2, "get cur": 2, // the bump (found done: no CAS), the checks' reads
		"list seg": 1, "list tail": 1, "list eps": 1, "get eps": 1, // the checks' one listing
		"stat seg": 1, "get tail": 1, // the checks, as on every start
		"put eps": 1, // the missing cut
	})
}

// TestFenceLegacyAdoptionRequestsExactly: a store written before fencing
// (epoch 0 objects, no claims) opened by a fencing writer: the claim of
// epoch 1, and the start-up checks' one read of the bucket after it, from
// which the cut takes its chain and its fence.
func TestFenceLegacyAdoptionRequestsExactly(t *testing.T) {
	shared := casBucket(t)
	legacy := newView(shared)
	legacy.noCAS = true
	dir := budgetShard(t, legacy)
	v := newView(shared)
	a := mustOpen(t, fenceOpts(dir, v, false))
	defer a.Close()
	if a.ship.Epoch() != 1 {
		t.Fatalf("epoch %d", a.ship.Epoch())
	}
	wantRequests(t, "legacy adoption", v, map[string]int{
		"list ep": 2, "put ep": 1, "put eps": 1, "stat ep": 1,
		"list eps": 2,                             // step 1, then the checks' listing after the claim
		"get rw":   2, "get cur": 2, "cas cur": 1, // the checks' reads, then the bump (no rw to bump)
		"list seg": 1, "list tail": 1, // the checks' one listing after the claim
		"stat seg": 1, "get tail": 1,
	})
}
