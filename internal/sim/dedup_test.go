package sim

import "testing"

// TestSimDedupRED is the RED control of the simulation's retries: with the
// transaction window off, a retry is written a second time, and the oracle
// says so (dedup-retry, or dedup-conflict for a reused id).
func TestSimDedupRED(t *testing.T) {
	simTxnWindow = -1
	defer func() { simTxnWindow = 0 }()
	const seeds = 20
	caught := map[string]int{}
	for seed := uint64(1); seed <= seeds; seed++ {
		res := Run(seed, Config{Steps: *flagSteps, Dir: tempDir(t)}, NewStats())
		if res.Failed() {
			caught[res.Violation.check]++
		}
	}
	t.Logf("RED control: window off, %d seeds: failing by check %v", seeds, caught)
	if caught["dedup-retry"]+caught["dedup-conflict"] < seeds/2 {
		t.Fatalf("with the window off only %v of %d seeds failed the retry checks", caught, seeds)
	}
}
