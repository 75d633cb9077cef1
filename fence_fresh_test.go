package bucketlog

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestFenceFreshAckRefusesAResumedStaleOwner: an asynchronous owner A idle
// for longer than one tick while B took the shard over (a paused pod
// resumed) checks the fence before it writes its next append: the HEAD
// finds B's claim, and the append is refused as fenced with nothing
// written. The RED control (DisableFenceFreshAck) acknowledges that
// append locally, beyond B's cut.
//
// A's tick never fires (an hour) and its clock is the test's: A ships by
// an explicit Ship, which returns once its whole pass is over, and the
// tick's worth of idleness is a move of the clock. (With a real 50 ms
// tick the test waited for A's shipped position and then let B claim,
// while A's pass was still in its cursor object's fence HEAD: that HEAD
// found B's claim and fenced A before the RED control's append. A's
// requests after its tail commit are held 100 ms to keep that window
// open.)
func TestFenceFreshAckRefusesAResumedStaleOwner(t *testing.T) {
	for _, disable := range []bool{false, true} {
		ctx := ctxT(t)
		shared := casBucket(t)
		clock := &testClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		va := newView(shared)
		var la atomic.Pointer[Log]
		var bOpens atomic.Bool
		va.setHooks(func(blobtier.Op, string) error {
			if l := la.Load(); l != nil && l.ShippedThrough() >= 3 && !bOpens.Load() {
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}, nil)
		oa := fenceOpts(t.TempDir(), va, false)
		oa.NoBackground, oa.Now, oa.DisableFenceFreshAck = false, clock.Now, disable
		a := mustOpen(t, oa)
		la.Store(a)
		for i := 1; i <= 3; i++ {
			if _, err := a.Append(ctx, ev("x", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.Ship(ctx, false); err != nil || a.ShippedThrough() != 3 {
			t.Fatalf("A's ship of 1..3: shipped through %d, %v", a.ShippedThrough(), err)
		}
		bOpens.Store(true)
		b := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
		if b.ship.Epoch() != 2 {
			t.Fatalf("B's epoch %d, want 2", b.ship.Epoch())
		}
		clock.add(3 * oa.TailInterval) // A's last good check is now older than one tick
		_, err := a.Append(ctx, ev("x", 4))
		if disable {
			if err != nil || a.store.Tip() != 4 {
				t.Fatalf("RED control: A's append without the fresh check: %v (tip %d), want acknowledged locally", err, a.store.Tip())
			}
		} else {
			wantFenced(t, "A's append after the takeover", err)
			if a.store.Tip() != 3 {
				t.Fatalf("the refused append was written: tip %d", a.store.Tip())
			}
		}
		a.Close()
		b.Close()
	}
}

// TestFenceFreshAckRequestBudget: the fresh check costs one HEAD for the
// first asynchronous append after more than one tick without a good fence
// check, and nothing while the last check is fresh (an active shard, whose
// ticks HEAD) or while the shard is idle.
func TestFenceFreshAckRequestBudget(t *testing.T) {
	ctx := ctxT(t)
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	v := newView(casBucket(t))
	o := fenceOpts(t.TempDir(), v, false)
	o.NoBackground, o.Now = false, clock // the tick (an hour) never fires here
	a := mustOpen(t, o)
	defer a.Close()
	if _, err := a.Append(ctx, ev("x", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	v.resetCounts()
	if _, err := a.Append(ctx, ev("x", 2)); err != nil {
		t.Fatal(err)
	}
	if n := v.total(); n != 0 {
		t.Fatalf("an append within a tick of the last check made %d requests", n)
	}
	advance(2 * time.Hour)
	for i := 3; i <= 5; i++ {
		if _, err := a.Append(ctx, ev("x", i)); err != nil {
			t.Fatal(err)
		}
	}
	if heads, n := v.count(blobtier.OpStat, "ep"), v.total(); heads != 1 || n != 1 {
		t.Fatalf("three appends after a stale check: %d HEADs of the claim, %d requests; want 1 and 1", heads, n)
	}
	t.Logf("fresh check: 0 requests within a tick of the last check, 1 HEAD for the first append after a stale one")
}
