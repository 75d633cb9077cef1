package reclaim

// Crash sweeps of a reclaim pass (CHECKLIST §5.6, §6.4; STYLE.md: crash at
// the k-th write for every k). The store runs on a faultfs.MemFS behind
// faultfs.CrashAt(k), switched on only for the pass, so k walks every
// write-class operation of the reclaim (write-forward, fsync, manifest temp
// file, fsync, rename, directory fsync, unlinks, checkpoint). After each
// crash the test reopens the store on a crash clone of the MemFS (what is
// durable, and seeded torn variants) and checks: nothing retained is lost,
// nothing reclaimed comes back, the consumer keeps its cursor, and the next
// pass completes and removes the orphans.

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

const crashRoot = "/data"

var crashDir = localseg.ShardDir(crashRoot, 0)

func newMachine(t testing.TB) *faultfs.MemFS {
	t.Helper()
	m := faultfs.NewMemFS()
	if err := m.MkdirAll(crashRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return m
}

// maxSweep guards against a pass that never finishes (a bug, not a
// measurement).
const maxSweep = 500

// clones returns the crash outcomes a sweep checks at one crash point:
// only what is durable, and torn variants.
func clones(m *faultfs.MemFS, k int) map[string]*faultfs.MemFS {
	out := map[string]*faultfs.MemFS{"durable": m.CrashClone(faultfs.CrashOptions{})}
	for s := 0; s < 3; s++ {
		seed := uint64(k*31 + s)
		out[fmt.Sprintf("torn-%d", seed)] = m.CrashClone(faultfs.CrashOptions{Torn: true, Seed: seed})
	}
	return out
}

func TestLocalReclaimCrashSweep(t *testing.T) { // §5.6
	const consumer, ack = "c", 30
	pol := Policy{Enabled: true}
	finished, points := false, 0
	for k := 0; k < maxSweep && !finished; k++ {
		m := newMachine(t)
		crash := faultfs.CrashAt(int64(k))
		toggle := faultfs.NewToggle(crash, false)
		opts := localseg.Options{SegmentMaxBytes: testSegBytes, NoPreallocate: k%2 == 1}
		wopts := opts
		wopts.FS = faultfs.Wrap(m, toggle)
		st, evs := filled(t, crashDir, wopts, 40, consumer, ack)
		before := snapshot(t, st)
		want := MakePlan(before, pol, nil)
		if want.Empty() {
			t.Fatal("the workload plans nothing")
		}

		toggle.On()
		_, res, err := Pass(st, pol, nil)
		op, crashed := crash.Crashed()
		if !crashed {
			if err != nil {
				t.Fatalf("k=%d: pass without a crash failed: %v", k, err)
			}
			if !slices.Equal(res.Removed, want.Remove) {
				t.Fatalf("k=%d: removed %v, planned %v", k, res.Removed, want.Remove)
			}
			finished = true
		} else {
			points++
		}
		st.Close()

		for name, c := range clones(m, k) {
			where := fmt.Sprintf("k=%d (%s) clone %s", k, op, name)
			checkAfterCrash(t, where, c, opts, evs, before, want, consumer, ack, pol)
		}
	}
	if !finished {
		t.Fatalf("the pass did not finish within %d crash points", maxSweep)
	}
	t.Logf("crashed at each of %d write-class operations, then ran to the end", points)
}

// checkAfterCrash reopens a crashed store and checks the invariants, then
// runs the next pass and checks it converges.
func checkAfterCrash(t *testing.T, where string, c *faultfs.MemFS, opts localseg.Options, evs []localseg.Event,
	before localseg.Snapshot, want Plan, consumer string, ack uint64, pol Policy) {
	t.Helper()
	opts.FS = c
	st, err := localseg.Open(crashDir, opts)
	if err != nil {
		t.Fatalf("%s: reopen: %v", where, err)
	}
	defer st.Close()
	snap := snapshot(t, st)
	// The base is all or nothing: the old one or the planned one.
	if snap.ReclaimedSeq != before.ReclaimedSeq && snap.ReclaimedSeq != want.ThroughSeq {
		t.Fatalf("%s: base %d, want %d or %d", where, snap.ReclaimedSeq, before.ReclaimedSeq, want.ThroughSeq)
	}
	if snap.Tip != before.Tip || snap.Consumers[consumer] != ack {
		t.Fatalf("%s: tip %d cursor %d, want %d and %d", where, snap.Tip, snap.Consumers[consumer], before.Tip, ack)
	}
	checkLog(t, st, evs, snap.ReclaimedSeq)
	// Nothing reclaimed comes back: no file at or below the base survives
	// the open, and reads below the base say reclaimed.
	if files := filesOnDisk(t, c, crashDir); slices.ContainsFunc(files, func(id uint64) bool { return id <= snap.ReclaimedSeg }) {
		t.Fatalf("%s: segment files at or below the base %d: %v", where, snap.ReclaimedSeg, files)
	}
	if snap.ReclaimedSeq > 0 {
		if _, err := st.Get(snap.ReclaimedSeq); !errors.Is(err, localseg.ErrReclaimed) {
			t.Fatalf("%s: Get(%d): %v", where, snap.ReclaimedSeq, err)
		}
	}

	// The next pass converges on the planned state.
	if _, _, err := Pass(st, pol, nil); err != nil {
		t.Fatalf("%s: next pass: %v", where, err)
	}
	after := snapshot(t, st)
	if after.ReclaimedSeq != want.ThroughSeq || after.ReclaimedSeg != want.ThroughSegment {
		t.Fatalf("%s: after the next pass base %d/%d, want %d/%d", where, after.ReclaimedSeq, after.ReclaimedSeg, want.ThroughSeq, want.ThroughSegment)
	}
	if files := filesOnDisk(t, c, crashDir); slices.ContainsFunc(files, func(id uint64) bool { return id <= want.ThroughSegment }) {
		t.Fatalf("%s: orphan segment files after the next pass: %v", where, files)
	}
	checkLog(t, st, evs, after.ReclaimedSeq)
	if after.Consumers[consumer] != ack {
		t.Fatalf("%s: cursor %d after the next pass", where, after.Consumers[consumer])
	}
}
