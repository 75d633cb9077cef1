package coldload_test

import (
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
)

// A stale writer's tail object that landed damaged (a damaging put before
// its check-after-put found the newer claim; seed 300989 of the two-writer
// simulation) holds no valid frame whatever its bytes: its key puts every
// event beyond the cut that ended its epoch (its `epoch` metadata). Hydrate
// skips and counts it as a zombie without needing its bytes, instead of
// refusing the whole restore on a verification error of an object it would
// have dropped intact. RED control: the same damaged object of the epoch
// that is still running is no zombie and still fails the restore, naming
// its key.
func TestDamagedZombieTailIsSkipped(t *testing.T) {
	for _, live := range []bool{false, true} {
		b, raw := memBucket(t)
		zombieAfterCut(t, b, false) // epoch 0 ends at 8; zombie tail 9..12 of epoch 0
		key := blobtier.TailKey(0, 9, 12)
		if live {
			// The running epoch's own object at the same place.
			if err := b.Delete(ctxT(t), key); err != nil {
				t.Fatal(err)
			}
			putE(t, b, key, frames(t, evFrames(9, 12, ownerPayload)...), 1)
		}
		rewriteAtRest(t, raw, key, func(d []byte) []byte { return d[:len(d)/2] })
		dir := target(t, 0)
		// Verify judges it as the restore does: a zombie, not a problem.
		vr, verr := coldload.Verify(ctxT(t), b, coldload.VerifyOptions{})
		if verr != nil {
			t.Fatal(verr)
		}
		if live {
			if vr.OK() || vr.Problems[0].Key != key || vr.Problems[0].Class != coldload.ProblemCorrupt {
				t.Fatalf("verify of the running epoch's damaged object: %+v", vr.Problems)
			}
		} else if !vr.OK() || vr.Shards[0].ZombieObjects != 1 {
			t.Fatalf("verify of a damaged zombie tail object: problems %+v, zombie objects %d (want none, 1)", vr.Problems, vr.Shards[0].ZombieObjects)
		}
		rep, err := coldload.Hydrate(ctxT(t), b, 0, dir, coldload.Options{})
		if live {
			mustErrIs(t, err, blobtier.ErrCorrupt)
			mustContain(t, err, key)
			absentOrEmpty(t, dir)
			continue
		}
		if err != nil {
			t.Fatalf("hydrate with a damaged zombie tail object: %v", err)
		}
		wantHistory(t, payloads(t, dir), 8, plain)
		if rep.ZombieObjects != 1 {
			t.Fatalf("zombie objects %d, want 1 (the damaged stale tail)", rep.ZombieObjects)
		}
	}
}
