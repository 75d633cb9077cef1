package reclaim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/bucketlog/bucketlog/localseg"
)

// Rule names what set a plan's sequence boundary.
type Rule string

const (
	// RuleDisabled: GC is off; nothing is reclaimed.
	RuleDisabled Rule = "disabled"
	// RuleNoInterest: no consumer and no retention rule; nothing is
	// reclaimed (interest-based GC never drops what nobody read).
	RuleNoInterest Rule = "no_interest"
	// RuleConsumer: the lowest consumer cursor (Plan.Consumer) sets it.
	RuleConsumer Rule = "consumer"
	// RuleRetention: keep-last-N sets it (no consumer is further behind).
	RuleRetention Rule = "retention"
)

// Stop names what ended the reclaimable prefix of segments.
type Stop string

const (
	// StopNone: the plan was disabled or had no boundary to walk to.
	StopNone Stop = ""
	// StopBoundary: the next segment ends above the sequence boundary.
	StopBoundary Stop = "boundary"
	// StopFloor: the next segment is one of the min-retained most recent.
	StopFloor Stop = "min_retained_floor"
	// StopNotDurable: the next segment is not durable in the bucket yet.
	StopNotDurable Stop = "not_durable"
	// StopActive: the next segment is the active (unsealed) one.
	StopActive Stop = "active_segment"
	// StopGap: the segment ids have a hole (never expected; a plan stops
	// rather than reclaim across it).
	StopGap Stop = "id_gap"
)

// Lag is one consumer's position.
type Lag struct {
	Consumer string `json:"consumer"`
	Cursor   uint64 `json:"cursor"` // 0: never acked
	Lag      uint64 `json:"lag"`    // tip − cursor
}

// Plan is what a reclaim pass would do and why. It is computed from a
// snapshot and changes nothing.
type Plan struct {
	Policy Policy `json:"policy"`
	Tip    uint64 `json:"tip"`
	// Boundary is the highest sequence the rules allow to reclaim, and
	// Rule/Consumer say what set it.
	Boundary uint64 `json:"boundary"`
	Rule     Rule   `json:"rule"`
	Consumer string `json:"consumer,omitempty"`
	// RetentionTarget is the sequence keep-last-N alone would allow (set
	// when the retention rule is on).
	RetentionTarget uint64 `json:"retention_target,omitempty"`
	// Remove lists the segment ids to reclaim: a contiguous prefix of the
	// store's sealed segments. RemoveBytes is their size.
	Remove      []uint64 `json:"remove"`
	RemoveBytes int64    `json:"remove_bytes"`
	// ThroughSegment and ThroughSeq are the reclaim base after the pass:
	// the last removed segment and its last event sequence, or the store's
	// current base when nothing is removed.
	ThroughSegment uint64 `json:"through_segment"`
	ThroughSeq     uint64 `json:"through_seq"`
	// Stop and StopSegment say which rule ended the prefix, at which
	// segment.
	Stop        Stop   `json:"stop,omitempty"`
	StopSegment uint64 `json:"stop_segment,omitempty"`
	// Retained is the number of segments left after the pass.
	Retained int `json:"retained"`
	// Lags lists every live consumer, by name.
	Lags []Lag `json:"lags"`
	// Reason explains the plan in one line for logs and reports.
	Reason string `json:"reason"`
}

// Empty reports whether the plan removes nothing.
func (p Plan) Empty() bool { return len(p.Remove) == 0 }

// MakePlan decides what a reclaim pass removes; see Plan. It is pure: it
// reads snap and calls durable, nothing else.
//
// Boundary: the interest ceiling is the lowest cursor over the live
// consumers (0 for one that never acked; none when there is no consumer).
// With keep-last-N the boundary is min(retention target, interest ceiling);
// without it, the ceiling, or 0 when there is no consumer. Then the plan
// takes the longest prefix of segments, in id order, each sealed, each
// ending at or below the boundary, each durable in the bucket when durable is
// non-nil (a shipping store must pass it), and leaving at least the floor of
// most recent segments.
func MakePlan(snap localseg.Snapshot, pol Policy, durable func(id uint64) bool) Plan {
	p := Plan{
		Policy:         pol,
		Tip:            snap.Tip,
		ThroughSegment: snap.ReclaimedSeg,
		ThroughSeq:     snap.ReclaimedSeq,
		Retained:       len(snap.Segments),
		Remove:         []uint64{},
	}
	p.Lags = lags(snap)

	if !pol.Enabled {
		p.Rule = RuleDisabled
		p.Reason = "GC is disabled: nothing is reclaimed"
		return p
	}

	var ceiling uint64 = math.MaxUint64
	hasInterest := len(p.Lags) > 0
	if hasInterest {
		// Lags is sorted by name, so a tie goes to the first name.
		for _, l := range p.Lags {
			if l.Cursor < ceiling {
				ceiling, p.Consumer = l.Cursor, l.Consumer
			}
		}
	}

	keep := pol.Keep()
	switch {
	case keep > 0:
		p.RetentionTarget = retentionTarget(snap, keep)
		if hasInterest && ceiling <= p.RetentionTarget {
			p.Boundary, p.Rule = ceiling, RuleConsumer
		} else {
			p.Boundary, p.Rule, p.Consumer = p.RetentionTarget, RuleRetention, ""
		}
	case hasInterest:
		p.Boundary, p.Rule = ceiling, RuleConsumer
	default:
		p.Rule = RuleNoInterest
		p.Reason = "no consumer and no retention rule: nothing is reclaimed"
		return p
	}

	floor := pol.Floor()
	n := len(snap.Segments)
	for i, s := range snap.Segments {
		stop := StopNone
		switch {
		case n-i <= floor:
			stop = StopFloor
		case i > 0 && (s.ID <= snap.Segments[i-1].ID || s.FirstSeq != snap.Segments[i-1].LastSeq+1):
			// Ids may skip a recorded segment-id jump (docs/FORMAT.md
			// §3.11): the store lists every segment it holds.
			stop = StopGap
		case !s.Sealed:
			stop = StopActive
		case s.LastSeq > p.Boundary:
			stop = StopBoundary
		case durable != nil && !durable(s.ID):
			stop = StopNotDurable
		}
		if stop != StopNone {
			p.Stop, p.StopSegment = stop, s.ID
			break
		}
		p.Remove = append(p.Remove, s.ID)
		p.RemoveBytes += s.Size
		p.ThroughSegment, p.ThroughSeq = s.ID, s.LastSeq
	}
	p.Retained = n - len(p.Remove)
	p.Reason = p.explain()
	return p
}

// retentionTarget is the highest sequence whose reclaim leaves keep
// segments (the active one included); the current base when the store has
// no more than keep.
func retentionTarget(snap localseg.Snapshot, keep int) uint64 {
	n := len(snap.Segments)
	if n <= keep {
		return snap.ReclaimedSeq
	}
	return snap.Segments[n-keep-1].LastSeq
}

func lags(snap localseg.Snapshot) []Lag {
	out := make([]Lag, 0, len(snap.Consumers))
	for name, cur := range snap.Consumers {
		var lag uint64
		if snap.Tip > cur {
			lag = snap.Tip - cur
		}
		out = append(out, Lag{Consumer: name, Cursor: cur, Lag: lag})
	}
	slices.SortFunc(out, func(a, b Lag) int { return strings.Compare(a.Consumer, b.Consumer) })
	return out
}

func (p Plan) explain() string {
	var b strings.Builder
	switch p.Rule {
	case RuleConsumer:
		fmt.Fprintf(&b, "consumer %q at %d holds the boundary", p.Consumer, p.Boundary)
		if p.Policy.Keep() > 0 {
			fmt.Fprintf(&b, " (retention of %d segments would allow %d)", p.Policy.Keep(), p.RetentionTarget)
		}
	case RuleRetention:
		fmt.Fprintf(&b, "retention keeps the last %d segments: boundary %d", p.Policy.Keep(), p.Boundary)
	}
	if len(p.Remove) == 0 {
		b.WriteString("; nothing to reclaim")
	} else {
		fmt.Fprintf(&b, "; reclaim segments %d..%d through sequence %d", p.Remove[0], p.ThroughSegment, p.ThroughSeq)
	}
	switch p.Stop {
	case StopFloor:
		fmt.Fprintf(&b, "; the min-retained floor of %d keeps segment %d and later", p.Policy.Floor(), p.StopSegment)
	case StopBoundary:
		fmt.Fprintf(&b, "; segment %d ends above the boundary", p.StopSegment)
	case StopNotDurable:
		fmt.Fprintf(&b, "; not durable in bucket: segment %d", p.StopSegment)
	case StopActive:
		fmt.Fprintf(&b, "; segment %d is the active segment", p.StopSegment)
	case StopGap:
		fmt.Fprintf(&b, "; segment ids jump before %d", p.StopSegment)
	}
	return b.String()
}
