package bucketlog

import (
	"errors"

	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/takeover"
)

// Writer fencing: exact interleavings of a zombie A (synchronous mode) and
// a new owner B, forced with per-writer hooks, each checked by the lineage
// oracle: every event acknowledged in sync mode is in the bucket's lineage
// with its payload, sequences are gapless, one payload per sequence.

// syncOwner opens A in sync mode with events 1..n acknowledged.
func syncOwner(t *testing.T, shared blobtier.Bucket, n int) (*Log, *writerView, acked) {
	t.Helper()
	va := newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), va, true))
	t.Cleanup(func() { a.Close() })
	ack := acked{}
	for i := 1; i <= n; i++ {
		if err := ack.append(t, a, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	return a, va, ack
}

func isPut(op blobtier.Op, key, kind string) bool { return op == blobtier.OpPut && kindOf(key) == kind }

// A's put lands before B's claim: B's takeover, listing after its claim,
// includes it. Kills the mutant that takes the chain and the cold load from
// a listing before the claim.
func TestFenceSyncPutBeforeTheClaimIsInTheCut(t *testing.T) {
	shared := casBucket(t)
	a, _, ackA := syncOwner(t, shared, 2)
	vb := newView(shared)
	var once sync.Once
	vb.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "ep") {
			once.Do(func() {
				if err := ackA.append(t, a, ev("a", 3)); err != nil {
					t.Errorf("A's append before the claim: %v", err)
				}
			})
		}
		return nil
	}, nil)
	b := mustOpen(t, fenceOpts(t.TempDir(), vb, true))
	defer b.Close()
	if len(ackA) != 3 || b.store.Tip() != 3 {
		t.Fatalf("A acknowledged %d; B starts after %d", len(ackA), b.store.Tip())
	}
	checkAcked(t, shared, ackA)
}

// A's put lands between B's claim and B's listing: A's HEAD sees the claim,
// so A is fenced and answers from the cut, which includes its put.
func TestFenceSyncPutBetweenClaimAndListIsAcknowledgedFromTheCut(t *testing.T) {
	shared := casBucket(t)
	a, va, ackA := syncOwner(t, shared, 2)
	putDone := make(chan struct{})
	var onceA sync.Once
	va.setHooks(nil, func(op blobtier.Op, key string, err error) error {
		if isPut(op, key, "tail") && err == nil {
			onceA.Do(func() { close(putDone) })
		}
		return err
	})
	vb := newView(shared)
	var onceB sync.Once
	res := make(chan error, 1)
	vb.setHooks(nil, func(op blobtier.Op, key string, err error) error {
		if isPut(op, key, "ep") && err == nil {
			onceB.Do(func() {
				go func() { res <- ackA.append(t, a, ev("a", 3)) }()
				select {
				case <-putDone:
				case <-time.After(bgWaitGuard):
					t.Error("A's put never landed between B's claim and B's listing")
				}
			})
		}
		return err
	})
	b := mustOpen(t, fenceOpts(t.TempDir(), vb, true))
	defer b.Close()
	if err := <-res; err != nil {
		t.Fatalf("A's put between claim and list is inside the cut, yet A answered %v", err)
	}
	if b.store.Tip() != 3 {
		t.Fatalf("B's cut at %d, want 3", b.store.Tip())
	}
	_, err := a.Append(ctxT(t), ev("a", 4))
	wantFenced(t, "A after the cut", err)
	checkAcked(t, shared, ackA)
}

// A's put lands after B's cut: A's HEAD, sent after its put, sees the claim;
// the cut excludes the put; A answers fenced and acknowledges nothing more.
// Kills the mutant that HEADs before the put.
func TestFenceSyncZombiePutAfterTheCutIsNotAcknowledged(t *testing.T) {
	shared := casBucket(t)
	a, va, ackA := syncOwner(t, shared, 2)
	vb := newView(shared)
	var b *Log
	var once sync.Once
	va.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "tail") {
			once.Do(func() { b = mustOpen(t, fenceOpts(t.TempDir(), vb, true)) })
		}
		return nil
	}, nil)
	err := ackA.append(t, a, ev("a", 3))
	wantFenced(t, "A's append whose put followed the cut", err)
	defer b.Close()
	ackB := acked{}
	for i := 3; i <= 4; i++ {
		if err := ackB.append(t, b, ev("b", i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(ackA) != 2 {
		t.Fatalf("A acknowledged %d events", len(ackA))
	}
	checkAcked(t, shared, ackA, ackB)
}

// A's HEAD fails: the tick fails, nothing is committed or acknowledged, and
// the next tick re-ships (our own identical object) and commits.
func TestFenceHeadFailingFailsTheTick(t *testing.T) {
	shared := casBucket(t)
	va := newView(shared)
	o := fenceOpts(t.TempDir(), va, true)
	o.SyncWait = 300 * time.Millisecond
	a := mustOpen(t, o)
	defer a.Close()
	ack := acked{}
	if err := ack.append(t, a, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	failing := errors.New("injected: HEAD failed")
	va.setHooks(func(op blobtier.Op, key string) error {
		if op == blobtier.OpStat && kindOf(key) == "ep" {
			return failing
		}
		return nil
	}, nil)
	before := a.ship.ShippedThrough()
	if err := ack.append(t, a, ev("a", 2)); !errors.Is(err, ErrNotInBucket) {
		t.Fatalf("append whose HEAD failed: %v, want not in bucket", err)
	}
	if got := a.ship.ShippedThrough(); got != before {
		t.Fatalf("the cursor moved from %d to %d with a failed HEAD", before, got)
	}
	va.setHooks(nil, nil)
	if _, err := a.Ship(ctxT(t), false); err != nil {
		t.Fatalf("the tick after the HEAD recovered: %v", err)
	}
	if a.ship.ShippedThrough() != 2 {
		t.Fatalf("shipped %d", a.ship.ShippedThrough())
	}
}

// A's put response is lost once: the retry finds its own object (same
// bytes, same epoch) and goes on.
func TestFenceLostPutResponseIsOurOwn(t *testing.T) {
	shared := casBucket(t)
	va := newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), va, true))
	defer a.Close()
	var once sync.Once
	va.setHooks(nil, func(op blobtier.Op, key string, err error) error {
		if isPut(op, key, "tail") && err == nil {
			once.Do(func() { err = errors.New("injected: response lost") })
		}
		return err
	})
	ack := acked{}
	if err := ack.append(t, a, ev("a", 1)); err != nil {
		t.Fatalf("append whose first put response was lost: %v", err)
	}
	checkAcked(t, shared, ack)
}

// A lost response to our own claim or cut is recognised (the nonce, the
// record) and the takeover goes on.
func TestFenceLostClaimAndCutResponsesGoOn(t *testing.T) {
	shared := casBucket(t)
	syncOwner(t, shared, 1)
	vb := newView(shared)
	lost := map[string]bool{}
	vb.setHooks(nil, func(op blobtier.Op, key string, err error) error {
		if op == blobtier.OpPut && (kindOf(key) == "ep" || kindOf(key) == "eps") && err == nil && !lost[key] {
			lost[key] = true
			return errors.New("injected: response lost")
		}
		return err
	})
	b, err := Open(ctxT(t), fenceOpts(t.TempDir(), vb, true))
	if err != nil {
		t.Fatalf("takeover with lost claim and cut responses: %v", err)
	}
	defer b.Close()
	if b.ship.Epoch() != 2 || len(lost) != 2 {
		t.Fatalf("epoch %d, lost %v", b.ship.Epoch(), lost)
	}
}

// A crash between the claim and the cut, then a restart on the same disk:
// no new claim; the restart finishes the takeover with its claim. Kills the
// mutant that writes owner.json after the cut.
func TestFenceCrashBetweenClaimAndCutThenSameDiskRestart(t *testing.T) {
	shared := casBucket(t)
	_, _, ackA := syncOwner(t, shared, 2)
	vb := newView(shared)
	vb.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "eps") {
			return errors.New("injected: crash before the cut")
		}
		return nil
	}, nil)
	dir := t.TempDir()
	if _, err := Open(ctxT(t), fenceOpts(dir, vb, true)); err == nil {
		t.Fatal("the open survived its crash")
	}
	vb.setHooks(nil, nil)
	b := mustOpen(t, fenceOpts(dir, vb, true))
	defer b.Close()
	if got := claims(t, shared); b.ship.Epoch() != 2 || len(got) != 2 {
		t.Fatalf("after the same-disk restart: epoch %d, claims %v; want epoch 2 and no new claim", b.ship.Epoch(), got)
	}
	ackB := acked{}
	if err := ackB.append(t, b, ev("b", 3)); err != nil {
		t.Fatal(err)
	}
	checkAcked(t, shared, ackA, ackB)
}

// A claimant X that stalls after its claim while Y claims higher and cuts:
// X's cut is off the chain, its HEAD after the cut sees Y's claim, and X
// never starts (so it acknowledges nothing). Kills the mutant without the
// HEAD after the cut.
func TestFenceStalledClaimantIsSupersededAfterItsCut(t *testing.T) {
	shared := casBucket(t)
	_, _, ackA := syncOwner(t, shared, 2)
	vx, vy := newView(shared), newView(shared)
	var y *Log
	var once sync.Once
	vx.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "eps") {
			once.Do(func() { y = mustOpen(t, fenceOpts(t.TempDir(), vy, true)) })
		}
		return nil
	}, nil)
	x, err := Open(ctxT(t), fenceOpts(t.TempDir(), vx, true))
	if err == nil {
		x.Close()
		t.Fatal("X started although Y claimed above it")
	}
	wantFenced(t, "X's open", err)
	defer y.Close()
	ackY := acked{}
	if err := ackY.append(t, y, ev("y", 3)); err != nil {
		t.Fatal(err)
	}
	_, lin, _ := lineageOracle(ctxT(t), shared)
	if lin.OnChain(2) || !lin.OnChain(3) {
		t.Fatalf("chain %v (off chain %v)", lin.Records(), lin.OffChain())
	}
	checkAcked(t, shared, ackA, ackY)
}

// A's zombie tail identical in bytes to B's (the same event re-appended to
// B at the same sequence) is not B's success: it carries A's epoch, which
// the lineage filters out. Kills identical-bytes success without the epoch
// check.
func TestFenceZombieTailIdenticalToOursIsNotSuccess(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	va := newView(shared)
	a := mustOpen(t, fenceOpts(t.TempDir(), va, false))
	defer a.Close()
	for i := 1; i <= 3; i++ {
		a.Append(ctx, ev("a", i))
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	e := ev("a", 4)
	a.Append(ctx, e) // acknowledged locally (async), not shipped
	o := fenceOpts(t.TempDir(), newView(shared), true)
	o.SyncWait = 300 * time.Millisecond
	b := mustOpen(t, o)
	defer b.Close()
	_, err := a.Ship(ctx, false)
	wantFenced(t, "A's tick", err)
	ackB := acked{}
	if err := ackB.append(t, b, e); err != nil && !errors.Is(err, ErrNotInBucket) {
		t.Fatal(err)
	}
	checkAcked(t, shared, ackB)
}

// The RED control and its fenced twin: A (sync) keeps appending after B took
// the shard over. Unfenced, both acknowledge a sequence 4 with different
// payloads, which the oracle finds; fenced, A acknowledges nothing beyond
// the cut and the oracle passes.
func TestFenceREDControl(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "unfenced", true: "fenced"}[fenced], func(t *testing.T) {
			ctx := ctxT(t)
			shared := casBucket(t)
			va, vb := newView(shared), newView(shared)
			va.noCAS, vb.noCAS = !fenced, !fenced
			a := mustOpen(t, fenceOpts(t.TempDir(), va, true))
			defer a.Close()
			ackA, ackB := acked{}, acked{}
			for i := 1; i <= 3; i++ {
				if err := ackA.append(t, a, ev("a", i)); err != nil {
					t.Fatal(err)
				}
			}
			b := mustOpen(t, fenceOpts(t.TempDir(), vb, true))
			defer b.Close()
			if err := ackB.append(t, b, ev("b", 4)); err != nil {
				t.Fatal(err)
			}
			res, err := a.AppendBatch(ctx, []localseg.Event{ev("a", 4), ev("a", 5)})
			if err == nil {
				e4, e5 := ev("a", 4), ev("a", 5)
				ackA[res.FirstSequence], ackA[res.LastSequence] = ident(e4.ExecutionID, e4.TransactionID, e4.Payload), ident(e5.ExecutionID, e5.TransactionID, e5.Payload)
			}
			got, _, oerr := lineageOracle(ctx, shared)
			violation := oerr != nil
			for _, set := range []acked{ackA, ackB} {
				for seq, p := range set {
					violation = violation || got[seq] != p
				}
			}
			t.Logf("fenced=%v: A's append after the takeover: %v; oracle: %v; violation found: %v", fenced, err, oerr, violation)
			if violation != !fenced {
				t.Fatalf("fenced=%v: violation=%v", fenced, violation)
			}
		})
	}
}

var _ = takeover.ErrStaleOwner

// A's rw/cur compare-and-swap after B's takeover bumped their epoch: the
// cursor write (which needs no tail put, so no HEAD precedes it) and GC's
// watermark are refused as fenced, and the objects keep B's epoch. Kills
// the mutant without the rw/cur bump. cursor-damaged: the cursor object is
// damaged at rest after the bump (its digest fails), cursor-undecodable: it
// is replaced by a body that is not JSON; either way its epoch cannot be
// read, and A's repair of it is refused too (sim seed 409 of -sim.writers:
// the zombie's repair lowered shipped_through) — kills a guard that takes
// an unreadable epoch for 0.
func TestFenceZombieCursorAndWatermarkCASAfterTheBump(t *testing.T) {
	for _, what := range []string{"cursor", "cursor-damaged", "cursor-undecodable", "watermark", "watermark-create"} {
		t.Run(what, func(t *testing.T) {
			ctx := ctxT(t)
			raw := memcas.New(nil)
			shared := blobtier.New(blob.NewBucket(raw), blobtier.Options{Timeout: 5 * time.Second})
			defer shared.Close()
			a := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
			defer a.Close()
			for i := 1; i <= 6; i++ {
				a.Append(ctx, ev("a", i))
				if i%2 == 0 {
					if _, err := a.Ship(ctx, true); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := a.Pull(ctx, "c", 1); err != nil {
				t.Fatal(err)
			}
			if what == "watermark" {
				// A GC pass creates rw; the zombie's next one replaces it.
				if _, err := a.Ack(ctx, "c", 2); err != nil {
					t.Fatal(err)
				}
				if _, err := a.GC(ctx, GCRequest{MinRetainedSegments: 1}); err != nil {
					t.Fatal(err)
				}
			}
			cursor := what != "watermark" && what != "watermark-create"
			if !cursor {
				if _, err := a.Ack(ctx, "c", 6); err != nil { // GC may reclaim everything
					t.Fatal(err)
				}
			}
			if _, err := a.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			b := mustOpen(t, fenceOpts(t.TempDir(), newView(shared), false))
			defer b.Close()
			key := blobtier.CursorKey(0)
			if !cursor {
				key = blobtier.WatermarkKey(0)
			}
			before, _, err := shared.Get(ctx, key)
			if what == "cursor-damaged" || what == "cursor-undecodable" {
				if err != nil {
					t.Fatal(err)
				}
				if e, _ := fencing.StoredEpoch(before); e != 2 {
					t.Fatalf("%s after the takeover carries epoch %d, want 2: %s", key, e, before)
				}
				before = before[:len(before)/2] // no epoch to read
				if what == "cursor-damaged" {
					raw.SetRaw(key, before)
				} else if err := shared.Put(ctx, key, before); err != nil {
					t.Fatal(err)
				}
				if _, _, err = shared.Get(ctx, key); (err != nil) != (what == "cursor-damaged") {
					t.Fatalf("%s read back: %v", what, err)
				}
			}
			switch {
			case what == "watermark-create" && errors.Is(err, blobtier.ErrNotFound):
				// rw absent at the takeover stays absent; the zombie's
				// create is refused by its HEAD of the next claim.
			case what == "cursor-damaged" || what == "cursor-undecodable":
			case err != nil:
				t.Fatal(err)
			default:
				if e, _ := fencing.StoredEpoch(before); e != 2 {
					t.Fatalf("%s after the takeover carries epoch %d, want 2: %s", key, e, before)
				}
			}
			if cursor {
				if _, err := a.Ack(ctx, "c", 3); err != nil {
					t.Fatal(err)
				}
				wantFenced(t, "A's cursor write", a.ship.ShipTail(ctx))
			} else {
				_, err := a.GC(ctx, GCRequest{MinRetainedSegments: 1, MaxRetainedSegments: 1})
				wantFenced(t, "A's GC", err)
			}
			after, ok := raw.Raw(key) // the bytes at rest, also when damaged
			if !ok && before != nil {
				t.Fatalf("%s vanished", key)
			}
			if string(after) != string(before) {
				t.Fatalf("A rewrote %s after the bump: %s → %s", key, before, after)
			}
		})
	}
}
