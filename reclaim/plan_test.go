package reclaim

import (
	"slices"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// synth builds a snapshot of n segments of per events each above a base of
// baseSeg segments (baseSeg*per events); the last segment is active and
// holds activeEvents events.
func synth(baseSeg uint64, n int, per uint64, activeEvents uint64, consumers map[string]uint64) localseg.Snapshot {
	snap := localseg.Snapshot{ReclaimedSeg: baseSeg, ReclaimedSeq: baseSeg * per, Consumers: consumers}
	next := baseSeg*per + 1
	for i := 0; i < n; i++ {
		events := per
		sealed := i < n-1
		if !sealed {
			events = activeEvents
		}
		s := localseg.SegmentInfo{ID: baseSeg + uint64(i) + 1, Sealed: sealed, FirstSeq: next,
			LastSeq: next + events - 1, Events: int(events), Size: int64(events) * 100}
		snap.Segments = append(snap.Segments, s)
		next += events
	}
	snap.Tip = next - 1
	return snap
}

func ids(from, to uint64) []uint64 {
	out := []uint64{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestPlanDisabledIsANoop(t *testing.T) { // §5.1
	snap := synth(0, 6, 10, 3, map[string]uint64{"c": 53})
	p := MakePlan(snap, Policy{MinRetainedSegments: 1, MaxRetainedSegments: 1}, nil)
	if !p.Empty() || p.Rule != RuleDisabled || p.ThroughSegment != 0 || p.ThroughSeq != 0 {
		t.Fatalf("disabled plan = %+v", p)
	}
	if len(p.Lags) != 1 || p.Lags[0] != (Lag{Consumer: "c", Cursor: 53, Lag: 0}) {
		t.Fatalf("lags = %+v", p.Lags)
	}
}

func TestPlanReclaimsConsumedSegments(t *testing.T) { // §5.2
	snap := synth(0, 6, 10, 3, map[string]uint64{"c": 30})
	p := MakePlan(snap, Policy{Enabled: true}, nil)
	if !slices.Equal(p.Remove, ids(1, 3)) || p.ThroughSegment != 3 || p.ThroughSeq != 30 {
		t.Fatalf("plan = %+v", p)
	}
	if p.Rule != RuleConsumer || p.Consumer != "c" || p.Boundary != 30 || p.Stop != StopBoundary || p.StopSegment != 4 {
		t.Fatalf("explanation = rule %s consumer %q boundary %d stop %s at %d", p.Rule, p.Consumer, p.Boundary, p.Stop, p.StopSegment)
	}
	if p.RemoveBytes != 3000 || p.Retained != 3 {
		t.Fatalf("bytes %d retained %d", p.RemoveBytes, p.Retained)
	}
	if !strings.Contains(p.Reason, `consumer "c" at 30`) || !strings.Contains(p.Reason, "segment 4 ends above the boundary") {
		t.Fatalf("reason %q", p.Reason)
	}
	// A segment ending exactly at the cursor goes; one a single event past
	// it stays.
	snap.Consumers["c"] = 29
	if p := MakePlan(snap, Policy{Enabled: true}, nil); !slices.Equal(p.Remove, ids(1, 2)) {
		t.Fatalf("cursor 29 removes %v", p.Remove)
	}
}

func TestPlanWithoutInterestReclaimsNothing(t *testing.T) { // §5.3
	cases := []struct {
		name      string
		consumers map[string]uint64
		rule      Rule
	}{
		{"no consumer", nil, RuleNoInterest},
		{"consumer never acked", map[string]uint64{"c": 0}, RuleConsumer},
		{"one of two never acked", map[string]uint64{"a": 53, "b": 0}, RuleConsumer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := synth(0, 8, 10, 3, tc.consumers)
			p := MakePlan(snap, Policy{Enabled: true, MinRetainedSegments: 1}, nil)
			if !p.Empty() || p.Rule != tc.rule || p.Boundary != 0 {
				t.Fatalf("plan = %+v", p)
			}
		})
	}
}

func TestPlanFloorHolds(t *testing.T) { // §5.4
	snap := synth(0, 6, 10, 3, map[string]uint64{"c": 53})
	for _, tc := range []struct {
		min  int
		keep int
	}{{0, 2}, {-3, 2}, {1, 1}, {2, 2}, {4, 4}, {6, 6}, {9, 6}} {
		p := MakePlan(snap, Policy{Enabled: true, MinRetainedSegments: tc.min}, nil)
		if p.Retained != tc.keep {
			t.Fatalf("min %d: retained %d, want %d (%s)", tc.min, p.Retained, tc.keep, p.Reason)
		}
		if p.Retained < len(snap.Segments) && p.Stop != StopFloor {
			t.Fatalf("min %d: stop %s, want the floor", tc.min, p.Stop)
		}
	}
	// The active segment is never removed, even with every event acked and
	// a floor of 1.
	p := MakePlan(snap, Policy{Enabled: true, MinRetainedSegments: 1}, nil)
	if slices.Contains(p.Remove, 6) || p.Retained != 1 {
		t.Fatalf("floor 1 plan = %+v", p)
	}
}

func TestPlanRetentionBoundsAConsumerlessStore(t *testing.T) { // §5.10
	snap := synth(0, 10, 10, 3, nil)
	p := MakePlan(snap, Policy{Enabled: true, MaxRetainedSegments: 3}, nil)
	if !slices.Equal(p.Remove, ids(1, 7)) || p.Retained != 3 || p.Rule != RuleRetention || p.ThroughSeq != 70 {
		t.Fatalf("plan = %+v", p)
	}
	// Applying the plan and planning again removes nothing more.
	after := synth(7, 3, 10, 3, nil)
	if p := MakePlan(after, Policy{Enabled: true, MaxRetainedSegments: 3}, nil); !p.Empty() || p.ThroughSeq != 70 || p.ThroughSegment != 7 {
		t.Fatalf("second plan = %+v", p)
	}
}

func TestPlanRetentionNeverAheadOfALaggingConsumer(t *testing.T) { // §5.11
	snap := synth(0, 10, 10, 3, map[string]uint64{"fast": 93, "slow": 25})
	p := MakePlan(snap, Policy{Enabled: true, MaxRetainedSegments: 2}, nil)
	if !slices.Equal(p.Remove, ids(1, 2)) || p.Rule != RuleConsumer || p.Consumer != "slow" || p.RetentionTarget != 80 {
		t.Fatalf("plan = %+v", p)
	}
	if !strings.Contains(p.Reason, `consumer "slow" at 25`) {
		t.Fatalf("reason %q", p.Reason)
	}
	// Once the slow consumer catches up, retention decides again.
	snap.Consumers["slow"] = 93
	if p := MakePlan(snap, Policy{Enabled: true, MaxRetainedSegments: 2}, nil); !slices.Equal(p.Remove, ids(1, 8)) || p.Rule != RuleRetention {
		t.Fatalf("caught-up plan = %+v", p)
	}
}

func TestPlanRetentionRespectsTheFloor(t *testing.T) { // §5.12
	snap := synth(0, 10, 10, 3, nil)
	p := MakePlan(snap, Policy{Enabled: true, MinRetainedSegments: 4, MaxRetainedSegments: 1}, nil)
	if p.Retained != 4 || !slices.Equal(p.Remove, ids(1, 6)) {
		t.Fatalf("plan = %+v", p)
	}
	if got := (Policy{MinRetainedSegments: 4, MaxRetainedSegments: 1}).Keep(); got != 4 {
		t.Fatalf("Keep = %d, want the floor 4", got)
	}
}

func TestPlanStopsAtTheFirstSegmentNotInTheBucket(t *testing.T) {
	snap := synth(0, 6, 10, 3, map[string]uint64{"c": 53})
	durable := func(id uint64) bool { return id != 2 }
	p := MakePlan(snap, Policy{Enabled: true}, durable)
	if !slices.Equal(p.Remove, []uint64{1}) || p.Stop != StopNotDurable || p.StopSegment != 2 {
		t.Fatalf("plan = %+v", p)
	}
	if !strings.Contains(p.Reason, "not durable in bucket: segment 2") {
		t.Fatalf("reason %q", p.Reason)
	}
}

func TestPlanExplainsLags(t *testing.T) {
	snap := synth(2, 4, 10, 5, map[string]uint64{"zed": 40, "alpha": 0, "mid": 55})
	p := MakePlan(snap, Policy{Enabled: true}, nil)
	want := []Lag{{"alpha", 0, 55}, {"mid", 55, 0}, {"zed", 40, 15}}
	if !slices.Equal(p.Lags, want) {
		t.Fatalf("lags = %+v, want %+v", p.Lags, want)
	}
	if !p.Empty() || p.Consumer != "alpha" || p.ThroughSegment != 2 || p.ThroughSeq != 20 {
		t.Fatalf("plan = %+v", p)
	}
}

func TestPlanEmptyStore(t *testing.T) {
	for _, snap := range []localseg.Snapshot{{}, {Segments: []localseg.SegmentInfo{{ID: 1, FirstSeq: 1}}}} {
		p := MakePlan(snap, Policy{Enabled: true, MaxRetainedSegments: 1, MinRetainedSegments: 1}, nil)
		if !p.Empty() {
			t.Fatalf("plan of an empty store = %+v", p)
		}
	}
}

func TestParsePolicyIsFailSafe(t *testing.T) { // §5.8
	cases := []struct {
		name     string
		env      map[string]string
		want     Policy
		warnings int
	}{
		{"unset", nil, Policy{MinRetainedSegments: 2}, 0},
		{"empty", map[string]string{EnvGC: "", EnvMinRetainedSegments: "", EnvMaxRetainedSegments: ""}, Policy{MinRetainedSegments: 2}, 0},
		{"off", map[string]string{EnvGC: "off"}, Policy{MinRetainedSegments: 2}, 0},
		{"consumer_ack", map[string]string{EnvGC: "consumer_ack"}, Policy{Enabled: true, MinRetainedSegments: 2}, 0},
		{"on", map[string]string{EnvGC: "on"}, Policy{Enabled: true, MinRetainedSegments: 2}, 0},
		{"enabled with blanks", map[string]string{EnvGC: " enabled\n"}, Policy{Enabled: true, MinRetainedSegments: 2}, 0},
		{"unknown", map[string]string{EnvGC: "yes"}, Policy{MinRetainedSegments: 2}, 1},
		{"wrong case", map[string]string{EnvGC: "ON"}, Policy{MinRetainedSegments: 2}, 1},
		{"true", map[string]string{EnvGC: "true"}, Policy{MinRetainedSegments: 2}, 1},
		{"min 5", map[string]string{EnvGC: "on", EnvMinRetainedSegments: "5"}, Policy{Enabled: true, MinRetainedSegments: 5}, 0},
		{"min 1", map[string]string{EnvMinRetainedSegments: "1"}, Policy{MinRetainedSegments: 1}, 0},
		{"min 0", map[string]string{EnvMinRetainedSegments: "0"}, Policy{MinRetainedSegments: 2}, 1},
		{"min negative", map[string]string{EnvMinRetainedSegments: "-4"}, Policy{MinRetainedSegments: 2}, 1},
		{"min garbage", map[string]string{EnvMinRetainedSegments: "two"}, Policy{MinRetainedSegments: 2}, 1},
		{"min float", map[string]string{EnvMinRetainedSegments: "2.5"}, Policy{MinRetainedSegments: 2}, 1},
		{"max 3", map[string]string{EnvMaxRetainedSegments: "3"}, Policy{MinRetainedSegments: 2, MaxRetainedSegments: 3}, 0},
		{"max 0", map[string]string{EnvMaxRetainedSegments: "0"}, Policy{MinRetainedSegments: 2}, 1},
		{"max garbage", map[string]string{EnvMaxRetainedSegments: "lots"}, Policy{MinRetainedSegments: 2}, 1},
		{"max negative", map[string]string{EnvMaxRetainedSegments: "-1"}, Policy{MinRetainedSegments: 2}, 1},
		{"max below floor", map[string]string{EnvMinRetainedSegments: "4", EnvMaxRetainedSegments: "2"}, Policy{MinRetainedSegments: 4, MaxRetainedSegments: 2}, 1},
		{"overflow", map[string]string{EnvMaxRetainedSegments: "99999999999999999999999"}, Policy{MinRetainedSegments: 2}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, warns := ParsePolicy(func(k string) string { return tc.env[k] })
			if got != tc.want || len(warns) != tc.warnings {
				t.Fatalf("ParsePolicy = %+v, warnings %q; want %+v and %d warnings", got, warns, tc.want, tc.warnings)
			}
			// Whatever the input, the parsed policy never reclaims more
			// than the default would on a store with consumers that read
			// everything and no retention asked for.
			if got.Floor() < 1 || (tc.env[EnvMaxRetainedSegments] == "" && got.Keep() != 0) {
				t.Fatalf("unsafe policy %+v", got)
			}
		})
	}
}
