package reclaim

// Tests of GC on a real localseg store (CHECKLIST §5).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// testSegBytes makes segments of a few events each.
const testSegBytes = 512

func testEvents(n int) []localseg.Event {
	evs := make([]localseg.Event, n)
	for i := range evs {
		exec := fmt.Sprint(100 + i%3)
		evs[i] = localseg.Event{ExecutionID: exec, TransactionID: fmt.Sprintf("txn-%s-%d", exec, i+1),
			Payload: fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i+1, "reclaim <&> é")}
	}
	return evs
}

// filled opens a fresh store in dir, appends n events and, when consumer is
// not empty, creates the consumer and acks it to ack (0: never acked).
func filled(t testing.TB, dir string, opts localseg.Options, n int, consumer string, ack uint64) (*localseg.Store, []localseg.Event) {
	t.Helper()
	if opts.SegmentMaxBytes == 0 {
		opts.SegmentMaxBytes = testSegBytes
	}
	st, err := localseg.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	evs := testEvents(n)
	if err := appendAll(st, evs); err != nil {
		t.Fatal(err)
	}
	if consumer != "" {
		if _, err := st.Pull(consumer, 1); err != nil {
			t.Fatal(err)
		}
		if ack > 0 {
			if _, err := st.Ack(consumer, ack); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st, evs
}

func snapshot(t testing.TB, st Store) localseg.Snapshot {
	t.Helper()
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func segIDs(snap localseg.Snapshot) []uint64 {
	out := make([]uint64, len(snap.Segments))
	for i, s := range snap.Segments {
		out[i] = s.ID
	}
	return out
}

// filesOnDisk lists the segment ids that have a file in dir.
func filesOnDisk(t testing.TB, fsys localseg.FS, dir string) []uint64 {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, n := range names {
		var id uint64
		if _, err := fmt.Sscanf(n, "seg-%016d.eslog", &id); err == nil && n == localseg.SegmentFileName(id) {
			out = append(out, id)
		}
	}
	return out
}

// checkLog checks that a full scan of st is clamped to base and returns
// every appended event from base to the end, byte for byte.
func checkLog(t testing.TB, st *localseg.Store, evs []localseg.Event, reclaimedSeq uint64) {
	t.Helper()
	var dv divergence
	if _, ok := checkRetained(st, evs, reclaimedSeq, reclaimedSeq, &dv); !ok {
		t.Fatal(*dv.first)
	}
}

func TestStoreGCDisabledIsANoop(t *testing.T) { // §5.1
	dir := t.TempDir()
	st, evs := filled(t, dir, localseg.Options{}, 40, "c", 40)
	before := snapshot(t, st)
	plan, res, err := Pass(st, Policy{MinRetainedSegments: 1, MaxRetainedSegments: 1}, nil)
	if err != nil || !plan.Empty() || len(res.Removed) != 0 || plan.Rule != RuleDisabled {
		t.Fatalf("disabled pass: %+v %+v %v", plan, res, err)
	}
	after := snapshot(t, st)
	if !slices.Equal(segIDs(after), segIDs(before)) || after.ReclaimedSeq != 0 {
		t.Fatalf("segments %v → %v", segIDs(before), segIDs(after))
	}
	if got := filesOnDisk(t, localseg.OSFS{}, dir); !slices.Equal(got, segIDs(before)) {
		t.Fatalf("files %v", got)
	}
	checkLog(t, st, evs, 0)
}

func TestStoreConsumedSegmentsAreReclaimed(t *testing.T) { // §5.2
	dir := t.TempDir()
	st, evs := filled(t, dir, localseg.Options{}, 40, "c", 30)
	before := snapshot(t, st)
	if len(before.Segments) < 6 {
		t.Fatalf("only %d segments; the test needs rollovers", len(before.Segments))
	}
	plan, res, err := Pass(st, Policy{Enabled: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) == 0 || !slices.Equal(res.Removed, plan.Remove) {
		t.Fatalf("removed %v, planned %v (%s)", res.Removed, plan.Remove, plan.Reason)
	}
	for _, s := range before.Segments {
		if slices.Contains(res.Removed, s.ID) && s.LastSeq > 30 {
			t.Fatalf("segment %d ending at %d was reclaimed with the consumer at 30", s.ID, s.LastSeq)
		}
	}
	// The prefix is maximal: the next segment ends past the cursor.
	next := before.Segments[len(res.Removed)]
	if next.LastSeq <= 30 && plan.Stop != StopFloor {
		t.Fatalf("segment %d ending at %d was kept (%s)", next.ID, next.LastSeq, plan.Reason)
	}
	after := snapshot(t, st)
	if after.ReclaimedSeq != plan.ThroughSeq || after.ReclaimedSeg != plan.ThroughSegment {
		t.Fatalf("base %d/%d, plan %d/%d", after.ReclaimedSeq, after.ReclaimedSeg, plan.ThroughSeq, plan.ThroughSegment)
	}
	for _, id := range res.Removed {
		if _, err := os.Stat(filepath.Join(dir, localseg.SegmentFileName(id))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment file %d still there: %v", id, err)
		}
	}
	checkLog(t, st, evs, after.ReclaimedSeq)
	if _, err := st.Get(after.ReclaimedSeq); !errors.Is(err, localseg.ErrReclaimed) {
		t.Fatalf("Get(%d) below the base: %v", after.ReclaimedSeq, err)
	}
	pull, err := st.Pull("c", 100)
	if err != nil || pull.Acked != 30 || len(pull.Records) != 10 || pull.Records[0].Seq != 31 {
		t.Fatalf("pull after reclaim: %+v, %v", pull, err)
	}
}

func TestStoreWithoutInterestNothingIsReclaimed(t *testing.T) { // §5.3
	for _, tc := range []struct {
		name     string
		consumer string
	}{{"no consumer", ""}, {"consumer never acked", "c"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, evs := filled(t, dir, localseg.Options{}, 40, tc.consumer, 0)
			before := filesOnDisk(t, localseg.OSFS{}, dir)
			plan, res, err := Pass(st, Policy{Enabled: true, MinRetainedSegments: 1}, nil)
			if err != nil || !plan.Empty() || len(res.Removed) != 0 {
				t.Fatalf("pass: %+v %+v %v", plan, res, err)
			}
			if got := filesOnDisk(t, localseg.OSFS{}, dir); !slices.Equal(got, before) {
				t.Fatalf("files %v → %v", before, got)
			}
			checkLog(t, st, evs, 0)
		})
	}
}

// TestStoreRedReclaimWithoutInterestLosesUnreadEvents is the RED control of
// §5.3: a reclaim that ignores the consumer's cursor (here, the store asked
// directly for everything sealed) destroys events the consumer never read.
// The interest rule is what prevents it.
func TestStoreRedReclaimWithoutInterestLosesUnreadEvents(t *testing.T) {
	st, _ := filled(t, t.TempDir(), localseg.Options{}, 40, "c", 0)
	snap := snapshot(t, st)
	lastSealed := snap.Segments[len(snap.Segments)-2].ID
	if _, err := st.Reclaim(lastSealed); err != nil {
		t.Fatal(err)
	}
	pull, err := st.Pull("c", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(pull.Records) > 0 && pull.Records[0].Seq == 1 {
		t.Fatal("RED control did not lose anything: the consumer still reads event 1")
	}
	if _, err := st.Get(1); !errors.Is(err, localseg.ErrReclaimed) {
		t.Fatalf("Get(1) after the blind reclaim: %v", err)
	}
}

func TestStoreFloorHolds(t *testing.T) { // §5.4
	for _, floor := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(floor), func(t *testing.T) {
			st, evs := filled(t, t.TempDir(), localseg.Options{}, 40, "c", 40)
			before := snapshot(t, st)
			plan, res, err := Pass(st, Policy{Enabled: true, MinRetainedSegments: floor}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := len(before.Segments) - floor; len(res.Removed) != want || plan.Stop != StopFloor {
				t.Fatalf("removed %d of %d segments with floor %d (%s)", len(res.Removed), len(before.Segments), floor, plan.Reason)
			}
			after := snapshot(t, st)
			if len(after.Segments) < floor {
				t.Fatalf("%d segments left, floor %d", len(after.Segments), floor)
			}
			checkLog(t, st, evs, after.ReclaimedSeq)
		})
	}
}

func TestStoreReopenHonoursTheBase(t *testing.T) { // §5.5
	dir := t.TempDir()
	st, evs := filled(t, dir, localseg.Options{}, 40, "c", 30)
	plan, _, err := Pass(st, Policy{Enabled: true}, nil)
	if err != nil || plan.Empty() {
		t.Fatalf("pass: %+v %v", plan, err)
	}
	want := snapshot(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		st, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: testSegBytes, ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		got := snapshot(t, st)
		if got.ReclaimedSeq != want.ReclaimedSeq || got.ReclaimedSeg != want.ReclaimedSeg || got.Tip != 40 ||
			got.Consumers["c"] != 30 || got.Segments[0].ID != want.ReclaimedSeg+1 {
			t.Fatalf("read-only %v: reopened at base %d/%d tip %d cursor %d first segment %d; want %d/%d",
				ro, got.ReclaimedSeq, got.ReclaimedSeg, got.Tip, got.Consumers["c"], got.Segments[0].ID, want.ReclaimedSeq, want.ReclaimedSeg)
		}
		checkLog(t, st, evs, want.ReclaimedSeq)
		if _, err := st.Get(want.ReclaimedSeq); !errors.Is(err, localseg.ErrReclaimed) || errors.Is(err, localseg.ErrCorrupt) {
			t.Fatalf("Get below the base: %v", err)
		}
		if !ro {
			res, err := st.Append(localseg.Event{ExecutionID: "100", TransactionID: "t-next", Payload: "next"})
			if err != nil || res.Seq != 41 {
				t.Fatalf("append after reopen: %+v %v", res, err)
			}
		}
		st.Close()
	}
}

// TestStoreLeftoverAfterTheManifestIsDeletedNeverRead: a crash between the
// manifest commit and the unlinks leaves reclaimed segment files behind.
// The next open deletes them without reading them: here they hold garbage
// that would be corruption if read. Both open paths (a trusted checkpoint,
// and a replay without one) are covered.
func TestStoreLeftoverAfterTheManifestIsDeletedNeverRead(t *testing.T) { // §5.6
	for _, withCheckpoint := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoint=%v", withCheckpoint), func(t *testing.T) {
			dir := t.TempDir()
			st, evs := filled(t, dir, localseg.Options{}, 40, "c", 30)
			_, res, err := Pass(st, Policy{Enabled: true}, nil)
			if err != nil || len(res.Removed) < 2 {
				t.Fatalf("pass: %+v %v", res, err)
			}
			base := snapshot(t, st)
			st.Close()
			garbage := []byte("this is not a frame; a reader that opens it reports corruption")
			for _, id := range res.Removed[len(res.Removed)-2:] {
				if err := os.WriteFile(filepath.Join(dir, localseg.SegmentFileName(id)), garbage, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if !withCheckpoint {
				if err := os.Remove(filepath.Join(dir, "checkpoint.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
			st, err = localseg.Open(dir, localseg.Options{SegmentMaxBytes: testSegBytes})
			if err != nil {
				t.Fatalf("open with leftovers: %v", err)
			}
			defer st.Close()
			if got := st.OpenReport().LeftoversRemoved; !slices.Equal(got, res.Removed[len(res.Removed)-2:]) {
				t.Fatalf("leftovers removed %v, want %v", got, res.Removed[len(res.Removed)-2:])
			}
			if got := filesOnDisk(t, localseg.OSFS{}, dir); slices.ContainsFunc(got, func(id uint64) bool { return id <= base.ReclaimedSeg }) {
				t.Fatalf("leftover files remain: %v", got)
			}
			checkLog(t, st, evs, base.ReclaimedSeq)
		})
	}
}

func TestStoreReadOnlyViewRefusesGC(t *testing.T) { // §5.7
	dir := t.TempDir()
	st, _ := filled(t, dir, localseg.Options{}, 40, "c", 30)
	st.Close()
	ro, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: testSegBytes, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	before := filesOnDisk(t, localseg.OSFS{}, dir)
	plan, _, err := Pass(ro, Policy{Enabled: true}, nil)
	if !errors.Is(err, localseg.ErrReadOnly) || plan.Empty() {
		t.Fatalf("GC on a read-only view: plan %v, err %v; want ErrReadOnly", plan.Remove, err)
	}
	if got := filesOnDisk(t, localseg.OSFS{}, dir); !slices.Equal(got, before) {
		t.Fatalf("files changed %v → %v", before, got)
	}
	if m, err := localseg.ReadReclaimManifest(localseg.OSFS{}, dir); err != nil || m != (localseg.ReclaimManifest{}) {
		t.Fatalf("manifest %+v %v", m, err)
	}
}

func TestStoreDeletedConsumerStopsHoldingGC(t *testing.T) { // §1.24 / docs/FORMAT.md §2.7
	st, evs := filled(t, t.TempDir(), localseg.Options{}, 40, "fast", 35)
	if _, err := st.Pull("stale", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ack("stale", 4); err != nil {
		t.Fatal(err)
	}
	plan, _, err := Pass(st, Policy{Enabled: true}, nil)
	if err != nil || plan.Consumer != "stale" || plan.ThroughSeq > 4 {
		t.Fatalf("with the stale consumer: %+v %v", plan, err)
	}
	if err := st.DeleteConsumer("stale"); err != nil {
		t.Fatal(err)
	}
	plan, _, err = Pass(st, Policy{Enabled: true}, nil)
	if err != nil || plan.Consumer != "fast" || plan.ThroughSeq <= 4 || plan.ThroughSeq > 35 {
		t.Fatalf("after deleting it: %+v %v", plan, err)
	}
	checkLog(t, st, evs, plan.ThroughSeq)
}

func TestStoreRetentionBoundsAConsumerlessStore(t *testing.T) { // §5.10
	st, evs := filled(t, t.TempDir(), localseg.Options{}, 60, "", 0)
	pol := Policy{Enabled: true, MaxRetainedSegments: 3}
	plan, res, err := Pass(st, pol, nil)
	if err != nil || len(res.Removed) == 0 || plan.Rule != RuleRetention {
		t.Fatalf("pass: %+v %+v %v", plan, res, err)
	}
	if n := len(snapshot(t, st).Segments); n != 3 {
		t.Fatalf("%d segments left, want 3", n)
	}
	checkLog(t, st, evs, plan.ThroughSeq)
	// More appends grow it; the next pass bounds it again.
	for i := 0; i < 20; i++ {
		if _, err := st.Append(localseg.Event{ExecutionID: "7", TransactionID: fmt.Sprint("more-", i), Payload: "more events to roll over"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := Pass(st, pol, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(snapshot(t, st).Segments); n != 3 {
		t.Fatalf("%d segments left after the second pass, want 3", n)
	}
}

func TestStoreRetentionNeverAheadOfALaggingConsumer(t *testing.T) { // §5.11
	st, evs := filled(t, t.TempDir(), localseg.Options{}, 60, "lagging", 6)
	plan, _, err := Pass(st, Policy{Enabled: true, MaxRetainedSegments: 2}, nil)
	if err != nil || plan.Rule != RuleConsumer || plan.Consumer != "lagging" || plan.ThroughSeq > 6 {
		t.Fatalf("pass: %+v %v", plan, err)
	}
	pull, err := st.Pull("lagging", 100)
	if err != nil || len(pull.Records) != 54 || pull.Records[0].Seq != 7 {
		t.Fatalf("the lagging consumer lost events: %d records from %v, %v", len(pull.Records), pull.Records[0].Seq, err)
	}
	checkLog(t, st, evs, plan.ThroughSeq)
}

func TestStoreRetentionRespectsTheFloor(t *testing.T) { // §5.12
	st, _ := filled(t, t.TempDir(), localseg.Options{}, 60, "", 0)
	plan, _, err := Pass(st, Policy{Enabled: true, MinRetainedSegments: 5, MaxRetainedSegments: 1}, nil)
	if err != nil || plan.Empty() {
		t.Fatalf("pass: %+v %v", plan, err)
	}
	if n := len(snapshot(t, st).Segments); n < 5 {
		t.Fatalf("%d segments left, floor 5", n)
	}
}
