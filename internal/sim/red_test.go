package sim

import (
	"os"
	"testing"

	"github.com/bucketlog/bucketlog/internal/redcontrol"
)

// TestSimNoFenceREDControl is the two-writer model's RED control: with every
// writer unfenced (-sim.nofence: the bucket presented as one that cannot
// fence) the oracle must find a violation within a few seeds, and the seed
// it fails must pass with fencing on (the same schedule: only the fencing
// differs). It reports the seeds to the first failure.
func TestSimNoFenceREDControl(t *testing.T) {
	const limit = 10
	known := parseKnown(t, *flagKnown)
	run := func(seed uint64, noFence bool) Result {
		cfg := Config{Steps: *flagSteps, Known: known, Dir: tempDir(t), Writers: true, NoFence: noFence}
		defer os.RemoveAll(cfg.Dir)
		return Run(seed, cfg, NewStats())
	}
	for seed := uint64(1); seed <= limit; seed++ {
		res := run(seed, true)
		if !res.Failed() {
			continue
		}
		t.Logf("unfenced: %d seed(s) to the first failure: seed %d at step %d: %v", seed, seed, res.Step, res.Violation)
		if fenced := run(seed, false); fenced.Failed() {
			t.Fatalf("seed %d fails with fencing on too (step %d: %v): the control shows nothing", seed, fenced.Step, fenced.Violation)
		}
		return
	}
	t.Fatalf("unfenced, %d seeds of the two-writer model found no violation: the fencing oracle cannot fail", limit)
}

// TestSimIndexREDControl is the index objects' RED control: with the
// readers' trust rule off (redcontrol.IndexObjectsUnchecked: an index
// object is used whatever segment it describes), the forged index objects
// of the damage-index op must fail the oracle within a bounded number of
// seeds, and the seed it fails must pass with the rule on.
func TestSimIndexREDControl(t *testing.T) {
	const limit = 60
	known := parseKnown(t, *flagKnown)
	run := func(seed uint64) Result {
		cfg := Config{Steps: *flagSteps, Known: known, Dir: tempDir(t)}
		defer os.RemoveAll(cfg.Dir)
		return Run(seed, cfg, NewStats())
	}
	defer redcontrol.IndexObjectsUnchecked.Store(false)
	for seed := uint64(1); seed <= limit; seed++ {
		redcontrol.IndexObjectsUnchecked.Store(true)
		res := run(seed)
		redcontrol.IndexObjectsUnchecked.Store(false)
		if !res.Failed() {
			continue
		}
		t.Logf("index objects unchecked: %d seed(s) to the first failure: seed %d at step %d: %v", seed, seed, res.Step, res.Violation)
		if checked := run(seed); checked.Failed() {
			t.Fatalf("seed %d fails with the trust rule on too (step %d: %v): the control shows nothing", seed, checked.Step, checked.Violation)
		}
		return
	}
	t.Fatalf("with index objects unchecked, %d seeds found no violation: the oracle cannot see a wrong index object", limit)
}
