package drives

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
)

// Drive limits and defaults.
const (
	// MinGCDriveEvents is the fewest events DriveGC accepts: with fewer,
	// acking three quarters of the log cannot move a whole segment past the
	// floor, and a drive that reclaims nothing proves nothing.
	MinGCDriveEvents = 8
	// MaxGCDriveEvents bounds a drive's run time.
	MaxGCDriveEvents = 100000
	// DefaultGCDriveSegmentBytes is the segment size of a drive when none is
	// given: small, so a few dozen events roll over many segments.
	DefaultGCDriveSegmentBytes = 256
	// DefaultGCDriveConsumer acks the log in DriveGC.
	DefaultGCDriveConsumer = "gc-drive"
	// GCDriver names the engine the drives exercise.
	GCDriver = "bucketlog-durable-segment"
)

// GCDriveReport is the outcome of DriveGC, shaped after the seed's
// durable-eventlog-gc output.
type GCDriveReport struct {
	Driver  string         `json:"driver"`
	GCHolds bool           `json:"gc_holds"`
	Report  GCDriveDetails `json:"report"`
}

// GCDriveDetails are the observations of DriveGC.
type GCDriveDetails struct {
	Events              int    `json:"events"`
	SegmentMaxBytes     int64  `json:"segment_max_bytes"`
	MinRetainedSegments int    `json:"min_retained_segments"`
	Consumer            string `json:"consumer"`
	// AckedThrough is the consumer's cursor: about three quarters of the log.
	AckedThrough   uint64 `json:"acked_through"`
	SegmentsBefore int    `json:"segments_before"`
	SegmentsAfter  int    `json:"segments_after"`
	BytesBefore    int64  `json:"bytes_before"`
	BytesAfter     int64  `json:"bytes_after"`
	// Reclaimed* describe the pass: how many segments went, and the base
	// it left (reclaimed_through_seq + 1 is the first retained sequence).
	ReclaimedSegments       int    `json:"reclaimed_segments"`
	ReclaimedThroughSeq     uint64 `json:"reclaimed_through_seq"`
	ReclaimedThroughSegment uint64 `json:"reclaimed_through_segment"`
	RetainedRecords         int    `json:"retained_records"`
	PlanReason              string `json:"plan_reason"`
	// GrowthBounded: the pass removed segments, never past the consumer.
	GrowthBounded bool `json:"growth_bounded"`
	// FloorHolds: at least min_retained_segments remain.
	FloorHolds bool `json:"floor_holds"`
	// GaplessFromBase: a scan from 0 is clamped to the base and returns
	// every sequence from the base to the tip.
	GaplessFromBase bool `json:"gapless_from_base"`
	// ZeroLoss: every retained event is byte-identical to what was
	// appended, and every event the consumer had not acked is retained.
	ZeroLoss bool `json:"zero_loss"`
	// ReclaimedReportsReclaimed: a point read below the base says
	// "reclaimed", not corruption.
	ReclaimedReportsReclaimed bool `json:"reclaimed_reports_reclaimed"`
	// RestartRecovers: a fresh open has the same base, records and cursor,
	// and the next append continues the sequence.
	RestartRecovers bool    `json:"restart_recovers"`
	Divergence      *string `json:"divergence"`
}

// Holds reports whether every invariant held.
func (r GCDriveReport) Holds() bool {
	d := r.Report
	return d.ReclaimedSegments > 0 && d.GrowthBounded && d.FloorHolds && d.GaplessFromBase && d.ZeroLoss &&
		d.ReclaimedReportsReclaimed && d.RestartRecovers && d.Divergence == nil
}

// DriveGC is the segment-GC drive (CHECKLIST §5.9): on a fresh root it
// appends events to shard 0 (<root>/shard-0000) with small segments, acks
// consumer (DefaultGCDriveConsumer when empty) through about three quarters
// of the log, runs one GC pass with the given floor (0: the default 2),
// and checks that growth was bounded while the retained log stayed gapless
// from the base with zero loss, that a read below the base says reclaimed,
// and that a restart recovers the base, the records and the cursor and
// continues the sequence. segMax 0 means DefaultGCDriveSegmentBytes.
//
// It refuses (ErrUsage) fewer than MinGCDriveEvents or more than
// MaxGCDriveEvents events, a root that is empty or already holds
// anything, a segment size over localseg.MaxSegmentBytes and a negative
// floor. A broken invariant is reported (Holds false), not returned as an
// error; an error means the drive could not run.
func DriveGC(root string, events int, segMax int64, minRetained int, consumer string) (GCDriveReport, error) {
	switch {
	case events < MinGCDriveEvents:
		return GCDriveReport{}, usagef("the GC drive needs at least %d events, got %d", MinGCDriveEvents, events)
	case events > MaxGCDriveEvents:
		return GCDriveReport{}, usagef("the GC drive takes at most %d events, got %d", MaxGCDriveEvents, events)
	case segMax < 0 || segMax > localseg.MaxSegmentBytes:
		return GCDriveReport{}, usagef("segment size %d is outside 1..%d", segMax, localseg.MaxSegmentBytes)
	case minRetained < 0:
		return GCDriveReport{}, usagef("min retained segments %d is negative", minRetained)
	}
	if segMax == 0 {
		segMax = DefaultGCDriveSegmentBytes
	}
	pol := reclaim.Policy{Enabled: true, MinRetainedSegments: minRetained}
	consumer = strings.TrimSpace(consumer)
	if consumer == "" {
		consumer = DefaultGCDriveConsumer
	}
	if err := prepareRoot(root); err != nil {
		return GCDriveReport{}, err
	}
	dir := localseg.ShardDir(root, 0)
	opts := localseg.Options{SegmentMaxBytes: segMax}

	st, err := localseg.Open(dir, opts)
	if err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: open: %w", err)
	}
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	appended := driveEvents(events)
	if err := appendAll(st, appended); err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: %w", err)
	}
	acked := uint64(events) * 3 / 4
	if _, err := st.Pull(consumer, 1); err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: pull: %w", err)
	}
	if _, err := st.Ack(consumer, acked); err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: ack: %w", err)
	}
	before, err := st.Snapshot()
	if err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: snapshot: %w", err)
	}
	plan, res, err := reclaim.Pass(st, pol, nil)
	if err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: %w", err)
	}
	after, err := st.Snapshot()
	if err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: snapshot: %w", err)
	}

	d := GCDriveDetails{
		Events: events, SegmentMaxBytes: segMax, MinRetainedSegments: pol.Floor(), Consumer: consumer,
		AckedThrough: acked, SegmentsBefore: len(before.Segments), SegmentsAfter: len(after.Segments),
		BytesBefore: segmentBytes(before), BytesAfter: segmentBytes(after),
		ReclaimedSegments: len(res.Removed), ReclaimedThroughSeq: after.ReclaimedSeq,
		ReclaimedThroughSegment: after.ReclaimedSeg, PlanReason: plan.Reason,
	}
	var dv checks
	d.GrowthBounded = len(res.Removed) > 0 && d.SegmentsAfter < d.SegmentsBefore && d.BytesAfter < d.BytesBefore &&
		after.ReclaimedSeq <= acked && after.ReclaimedSeq == plan.ThroughSeq ||
		dv.fail("the pass reclaimed %d segments through %d (consumer at %d; plan: %s)",
			len(res.Removed), after.ReclaimedSeq, acked, plan.Reason)
	d.FloorHolds = d.SegmentsAfter >= pol.Floor() ||
		dv.fail("%d segments left, below the floor of %d", d.SegmentsAfter, pol.Floor())

	retained, ok := checkRetained(st, appended, after.ReclaimedSeq, acked, &dv)
	d.RetainedRecords = retained
	d.GaplessFromBase, d.ZeroLoss = ok, ok
	d.ReclaimedReportsReclaimed = checkReclaimedRead(st, after.ReclaimedSeq, &dv)

	// Restart: close, open a fresh store, compare, append once more.
	if err := st.Close(); err != nil {
		st = nil
		return GCDriveReport{}, fmt.Errorf("gc drive: close: %w", err)
	}
	st = nil
	st, err = localseg.Open(dir, opts)
	if err != nil {
		return GCDriveReport{}, fmt.Errorf("gc drive: reopen: %w", err)
	}
	d.RestartRecovers = checkRestart(st, appended, after, consumer, acked, &dv)

	d.Divergence = dv.first
	rep := GCDriveReport{Driver: GCDriver, Report: d}
	rep.GCHolds = rep.Holds()
	return rep, nil
}

// driveEvents is the deterministic event set of a drive: two executions,
// payloads that carry their sequence so a misplaced record shows.
func driveEvents(n int) []localseg.Event {
	evs := make([]localseg.Event, n)
	for i := range evs {
		exec := []string{"100", "200"}[i%2]
		evs[i] = localseg.Event{
			ExecutionID:   exec,
			TransactionID: fmt.Sprintf("txn-%s-%d", exec, i+1),
			Payload:       fmt.Sprintf(`{"n":%d,"text":"gc drive <&> é"}`, i+1),
		}
	}
	return evs
}

func appendAll(st *localseg.Store, evs []localseg.Event) error {
	for i, ev := range evs {
		res, err := st.Append(ev)
		if err != nil {
			return fmt.Errorf("append event %d: %w", i+1, err)
		}
		if res.Seq != uint64(i+1) {
			return fmt.Errorf("append event %d got sequence %d", i+1, res.Seq)
		}
	}
	return nil
}

func segmentBytes(snap localseg.Snapshot) int64 {
	var n int64
	for _, s := range snap.Segments {
		n += s.Size
	}
	return n
}

// checkRetained scans from 0 and checks the scan is clamped to the base,
// gapless to the tip, and byte-identical to what was appended; and that
// nothing the consumer had not acked is gone.
func checkRetained(st *localseg.Store, appended []localseg.Event, reclaimedSeq, acked uint64, dv *checks) (int, bool) {
	page, err := st.Scan(0, len(appended)+1)
	if err != nil {
		return 0, dv.fail("scan after reclaim: %v", err)
	}
	n := len(page.Records)
	switch {
	case reclaimedSeq > acked:
		return n, dv.fail("reclaimed through %d, past the consumer at %d", reclaimedSeq, acked)
	case page.Base != reclaimedSeq+1:
		return n, dv.fail("scan base %d, want %d", page.Base, reclaimedSeq+1)
	case reclaimedSeq > 0 && !page.Clamped:
		return n, dv.fail("a scan from 0 below the base %d is not reported as clamped", page.Base)
	case uint64(n) != uint64(len(appended))-reclaimedSeq:
		return n, dv.fail("scan returned %d records, want %d", n, uint64(len(appended))-reclaimedSeq)
	}
	for i, r := range page.Records {
		want := reclaimedSeq + uint64(i) + 1
		ev := appended[want-1]
		if r.Seq != want || r.ExecutionID != ev.ExecutionID || r.TransactionID != ev.TransactionID || r.Payload != ev.Payload {
			return n, dv.fail("record %d is %+v, want sequence %d %+v", i, r, want, ev)
		}
	}
	return n, true
}

func checkReclaimedRead(st *localseg.Store, reclaimedSeq uint64, dv *checks) bool {
	if reclaimedSeq == 0 {
		return dv.fail("nothing was reclaimed")
	}
	_, err := st.Get(reclaimedSeq)
	if !errors.Is(err, localseg.ErrReclaimed) || errors.Is(err, localseg.ErrCorrupt) {
		return dv.fail("a read of reclaimed sequence %d gave %v, want reclaimed", reclaimedSeq, err)
	}
	return true
}

func checkRestart(st *localseg.Store, appended []localseg.Event, want localseg.Snapshot, consumer string, acked uint64, dv *checks) bool {
	snap, err := st.Snapshot()
	if err != nil {
		return dv.fail("snapshot after restart: %v", err)
	}
	if snap.ReclaimedSeq != want.ReclaimedSeq || snap.ReclaimedSeg != want.ReclaimedSeg || snap.Tip != want.Tip {
		return dv.fail("after restart: base %d/%d tip %d, want %d/%d tip %d",
			snap.ReclaimedSeq, snap.ReclaimedSeg, snap.Tip, want.ReclaimedSeq, want.ReclaimedSeg, want.Tip)
	}
	if cur, ok := snap.Consumers[consumer]; !ok || cur != acked {
		return dv.fail("after restart consumer %q is at %d (present %v), want %d", consumer, cur, ok, acked)
	}
	var inner checks
	if _, ok := checkRetained(st, appended, want.ReclaimedSeq, acked, &inner); !ok {
		return dv.fail("after restart: %s", *inner.first)
	}
	res, err := st.Append(localseg.Event{ExecutionID: "100", TransactionID: "txn-after-restart", Payload: "after restart"})
	if err != nil || res.Seq != want.Tip+1 {
		return dv.fail("append after restart: sequence %d, %v; want %d", res.Seq, err, want.Tip+1)
	}
	return true
}
