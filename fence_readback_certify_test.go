package bucketlog

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/fencing"
)

// TestFenceCheckBesideAFailedReadBackCertifiesNothing: the fence HEAD runs
// beside the tail object's read-back (tailbatch.Hooks.AfterUpload). When
// the read-back fails, that HEAD must vouch for nothing: here a claimant
// claims and cuts at sequence 1, then the writer's segment upload moves
// its shipped position over sequence 2 with no tail put of its own. An
// acknowledgement of 2 on the strength of the HEAD beside the failed
// read-back would be an acknowledged event the lineage drops.
func TestFenceCheckBesideAFailedReadBackCertifiesNothing(t *testing.T) {
	ctx := ctxT(t)
	shared := casBucket(t)
	v := newView(shared)
	l := mustOpen(t, fenceOpts(t.TempDir(), v, true))
	defer l.Close()
	got := acked{}
	if err := got.append(t, l, ev("w", 0)); err != nil {
		t.Fatal(err)
	}
	gate, blocked := make(chan struct{}), make(chan struct{})
	var once, onceBlocked sync.Once
	failedGet := false
	var mu sync.Mutex
	v.setHooks(func(op blobtier.Op, key string) error {
		if kindOf(key) != blobtier.KindTail.String() {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op == blobtier.OpGet && !failedGet:
			failedGet = true
			return errors.New("injected: the read-back fails")
		case op == blobtier.OpPut && failedGet:
			mu.Unlock()
			onceBlocked.Do(func() { close(blocked) })
			<-gate
			mu.Lock()
		}
		return nil
	}, nil)
	defer once.Do(func() { close(gate) })
	res := make(chan error, 1)
	go func() { res <- got.append(t, l, ev("w", 1)) }()
	select {
	case <-blocked:
	case <-time.After(bgWaitGuard):
		t.Fatal("the retry's put never came")
	}
	// A claimant claims epoch 2 and cuts at sequence 1 (its listing saw
	// only the first event).
	claim, err := fencing.Claim{Epoch: 2, Shard: 0, Owner: "test/b", Nonce: "0123456789abcdef0123456789abcdef"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cut, err := fencing.NewStartRecord(2, 1, 1, 1<<40, 0).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.PutIfAbsent(ctx, blobtier.ClaimKey(0, 2), claim, 2); err != nil {
		t.Fatal(err)
	}
	if err := shared.PutIfAbsent(ctx, blobtier.StartKey(0, 2), cut, 2); err != nil {
		t.Fatal(err)
	}
	_, _ = l.Ship(ctx, true) // the segment holding 2 goes up after the cut
	once.Do(func() { close(gate) })
	if err := <-res; err == nil {
		t.Fatal("sequence 2 acknowledged: no fence HEAD after a put that holds it saw the bucket without the claim")
	}
	bucket, _, err := lineageOracle(ctx, shared)
	if err != nil {
		t.Fatal(err)
	}
	for seq, want := range got {
		if bucket[seq] != want {
			t.Fatalf("acknowledged sequence %d: the lineage holds %q, want %q", seq, bucket[seq], want)
		}
	}
}
