package reclaim

import (
	"fmt"
	"strconv"
	"strings"
)

// Environment variables read by ParsePolicy.
const (
	EnvGC                  = "NOETL_EHDB_EVENTLOG_GC"
	EnvMinRetainedSegments = "NOETL_EHDB_EVENTLOG_GC_MIN_RETAINED_SEGMENTS"
	EnvMaxRetainedSegments = "NOETL_EHDB_EVENTLOG_GC_MAX_RETAINED_SEGMENTS"
)

// DefaultMinRetainedSegments is the floor used when Policy.MinRetainedSegments
// is zero or negative.
const DefaultMinRetainedSegments = 2

// Policy says what a reclaim pass may remove. The zero value reclaims
// nothing (Enabled is false); Policy{Enabled: true} is interest-based GC with
// the default floor of 2 segments.
type Policy struct {
	// Enabled turns GC on. When false a plan removes nothing whatever the
	// other fields say (docs/FORMAT.md §8.1: GC is off by default). An operator's
	// explicit gc request sets it.
	Enabled bool `json:"enabled"`
	// MinRetainedSegments is the floor: a pass always keeps at least this
	// many of the most recent segments, the active one included. Zero or a
	// negative value means DefaultMinRetainedSegments; the effective floor
	// is never below 1 because the active segment is never reclaimed.
	MinRetainedSegments int `json:"min_retained_segments"`
	// MaxRetainedSegments turns on keep-last-N retention: the store is
	// bounded to N segments even without consumer interest, but never ahead
	// of a live consumer's cursor. Zero means interest only. A value below
	// the floor is raised to the floor.
	MaxRetainedSegments int `json:"max_retained_segments,omitempty"`
}

// Floor is the effective min-retained floor.
func (p Policy) Floor() int {
	if p.MinRetainedSegments <= 0 {
		return DefaultMinRetainedSegments
	}
	return p.MinRetainedSegments
}

// Keep is the effective keep-last-N (0: no retention rule), clamped up to
// the floor.
func (p Policy) Keep() int {
	if p.MaxRetainedSegments <= 0 {
		return 0
	}
	return max(p.MaxRetainedSegments, p.Floor())
}

// ParsePolicy reads the GC policy from the environment through getenv (pass
// os.Getenv). It is fail-safe: an unset, empty or unrecognised value never
// starts deleting data or deletes more than the default would. It keeps the
// default and returns a warning saying so, for the caller to log.
//
//   - NOETL_EHDB_EVENTLOG_GC: "off" (default), or exactly "consumer_ack",
//     "on" or "enabled" (surrounding blanks ignored) to turn GC on;
//     anything else leaves it off.
//   - NOETL_EHDB_EVENTLOG_GC_MIN_RETAINED_SEGMENTS: a decimal integer ≥ 1
//     (default 2); anything else keeps 2.
//   - NOETL_EHDB_EVENTLOG_GC_MAX_RETAINED_SEGMENTS: unset means interest
//     only; a decimal integer ≥ 1 turns on keep-last-N (raised to the floor
//     with a warning when below it); anything else, 0 included, keeps
//     interest only.
func ParsePolicy(getenv func(string) string) (Policy, []string) {
	var (
		pol   Policy
		warns []string
	)
	switch v := strings.TrimSpace(getenv(EnvGC)); v {
	case "", "off":
	case "consumer_ack", "on", "enabled":
		pol.Enabled = true
	default:
		warns = append(warns, fmt.Sprintf("%s=%q is not one of off, consumer_ack, on, enabled: GC stays off", EnvGC, v))
	}

	pol.MinRetainedSegments = DefaultMinRetainedSegments
	if raw := getenv(EnvMinRetainedSegments); strings.TrimSpace(raw) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 1 {
			warns = append(warns, fmt.Sprintf("%s=%q is not an integer ≥ 1: keeping the floor at %d",
				EnvMinRetainedSegments, raw, DefaultMinRetainedSegments))
		} else {
			pol.MinRetainedSegments = n
		}
	}

	if raw := getenv(EnvMaxRetainedSegments); strings.TrimSpace(raw) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		switch {
		case err != nil || n < 1:
			warns = append(warns, fmt.Sprintf("%s=%q is not an integer ≥ 1: retention stays off (interest only)",
				EnvMaxRetainedSegments, raw))
		default:
			pol.MaxRetainedSegments = n
			if n < pol.MinRetainedSegments {
				warns = append(warns, fmt.Sprintf("%s=%d is below the floor %d: keeping %d segments",
					EnvMaxRetainedSegments, n, pol.MinRetainedSegments, pol.MinRetainedSegments))
			}
		}
	}
	return pol, warns
}
