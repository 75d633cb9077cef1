package bucketlog

import (
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestFenceCutBetweenListingAndClaimIsOnTheChain: X claims epoch 2 and
// stalls before its cut; Y lists the claims (M = 2); X then cuts, opens and
// acknowledges event 3 in sync mode (its HEAD of epoch 3 finds nothing);
// only then does Y claim epoch 3. Y's chain, L and prev_end must come from
// its listing after the claim, which holds X's cut: X's acknowledged event
// survives. Kills the mutant that takes the chain from a listing before
// the claim (FENCING.md: it chains past the cut written in between and
// drops that epoch's acknowledged events).
func TestFenceCutBetweenListingAndClaimIsOnTheChain(t *testing.T) {
	shared := casBucket(t)
	_, _, ackA := syncOwner(t, shared, 2)

	vx := newView(shared)
	atCut, goCut := make(chan struct{}), make(chan struct{})
	var onceX sync.Once
	vx.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "eps") {
			onceX.Do(func() {
				close(atCut)
				<-goCut
			})
		}
		return nil
	}, nil)
	ackX := acked{}
	xDone := make(chan *Log, 1)
	go func() {
		x, err := Open(ctxT(t), fenceOpts(t.TempDir(), vx, true))
		if err != nil {
			t.Errorf("X's open: %v", err)
			xDone <- nil
			return
		}
		if err := ackX.append(t, x, ev("x", 3)); err != nil {
			t.Errorf("X's append before Y's claim: %v", err)
		}
		xDone <- x
	}()
	select {
	case <-atCut:
	case <-time.After(10 * time.Second):
		t.Fatal("X never reached its cut")
	}

	vy := newView(shared)
	var x *Log
	var onceY sync.Once
	vy.setHooks(func(op blobtier.Op, key string) error {
		if isPut(op, key, "ep") {
			onceY.Do(func() {
				// Y listed the claims already (it claims M+1 = 3 next).
				close(goCut)
				x = <-xDone
			})
		}
		return nil
	}, nil)
	y := mustOpen(t, fenceOpts(t.TempDir(), vy, true))
	defer y.Close()
	if x != nil {
		defer x.Close()
	}
	if len(ackX) != 1 || y.ship.Epoch() != 3 {
		t.Fatalf("X acknowledged %d events; Y's epoch %d", len(ackX), y.ship.Epoch())
	}
	_, lin, err := lineageOracle(ctxT(t), shared)
	if err != nil {
		t.Fatal(err)
	}
	if !lin.OnChain(2) || !lin.OnChain(3) {
		t.Fatalf("chain %v (off chain %v): Y's cut must extend X's", lin.Records(), lin.OffChain())
	}
	if end, ok := lin.End(2); !ok || end != 3 || y.store.Tip() != 3 {
		t.Fatalf("Y's cut ends epoch 2 at %d (%v), Y's tip %d; want 3", end, ok, y.store.Tip())
	}
	checkAcked(t, shared, ackA, ackX)
}
