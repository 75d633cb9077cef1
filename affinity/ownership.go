package affinity

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Environment variables that carry a replica's ownership (README.md, Configuration).
const (
	EnvShardIndex = "NOETL_SHARD_INDEX"
	EnvShardCount = "NOETL_SHARD_COUNT"
)

// MaxShardCount bounds shard_count. Shard directories are named with four
// decimal digits (shard-NNNN), so a larger pool would produce names of a
// different width that other tools would not expect.
const MaxShardCount = 10000

// Decision labels. They appear in JSON outputs, logs and metrics, so they are
// part of the contract: do not change them.
const (
	// DecisionOwned: this replica owns the execution and serves the write.
	DecisionOwned = "owned"
	// DecisionNotOwner: another replica owns the execution; the write was
	// refused with no side effect.
	DecisionNotOwner = "not_owner"
	// ServedByOwnerResident: a read served from the owner's resident store.
	ServedByOwnerResident = "owner_resident"
	// ServedByNonOwnerColdLoad: a read served by a read-only cold load of a
	// shard this replica does not own.
	ServedByNonOwnerColdLoad = "non_owner_cold_load"
)

// ErrUsage is the class of every usage and configuration error of the
// engine (a bad option, flag or shard pair); the root package and the
// shipper re-export it as their ErrUsage.
var ErrUsage = errors.New("bucketlog: usage")

// ErrConfig is the class of every ownership configuration error. It is
// also an ErrUsage.
var ErrConfig = fmt.Errorf("%w: invalid shard configuration", ErrUsage)

// ConfigError names what is wrong with a shard index/count pair.
// errors.Is(err, ErrConfig) holds for it.
type ConfigError struct {
	Index, Count string // the raw values as given
	Reason       string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("affinity: invalid shard configuration (index %q, count %q): %s", e.Index, e.Count, e.Reason)
}

func (e *ConfigError) Is(target error) bool { return target == ErrConfig || target == ErrUsage }

// Ownership says which shard a replica owns: shard Index of a pool of Count.
// The zero value is not valid; SingleOwner is the pool of one.
type Ownership struct {
	Index, Count int
}

// SingleOwner owns every execution: shard 0 of 1.
var SingleOwner = Ownership{Index: 0, Count: 1}

// Validate reports whether the pair is usable: 0 ≤ Index < Count ≤
// MaxShardCount.
func (o Ownership) Validate() error {
	idx, cnt := strconv.Itoa(o.Index), strconv.Itoa(o.Count)
	switch {
	case o.Count <= 0:
		return &ConfigError{Index: idx, Count: cnt, Reason: "shard count must be at least 1"}
	case o.Count > MaxShardCount:
		return &ConfigError{Index: idx, Count: cnt, Reason: fmt.Sprintf("shard count must be at most %d", MaxShardCount)}
	case o.Index < 0:
		return &ConfigError{Index: idx, Count: cnt, Reason: "shard index must not be negative"}
	case o.Index >= o.Count:
		return &ConfigError{Index: idx, Count: cnt, Reason: "shard index must be below the shard count"}
	}
	return nil
}

// OwnerOf returns the shard that owns executionID in this pool.
func (o Ownership) OwnerOf(executionID string) int { return ShardFor(executionID, o.Count) }

// Owns reports whether this replica owns executionID.
func (o Ownership) Owns(executionID string) bool { return o.OwnerOf(executionID) == o.Index }

// Decide returns DecisionOwned or DecisionNotOwner for executionID.
func (o Ownership) Decide(executionID string) string {
	if o.Owns(executionID) {
		return DecisionOwned
	}
	return DecisionNotOwner
}

func (o Ownership) String() string { return fmt.Sprintf("shard %d of %d", o.Index, o.Count) }

// ParseOwnership builds an Ownership from the raw index and count strings
// of the environment or of flags. A value that is empty after trimming
// counts as unset. Both unset means SingleOwner. Anything else must be a
// complete, valid pair: a partial pair, a value that is not a decimal
// integer, a negative value, a count of 0 or an index at or above the count
// is a *ConfigError naming the problem. It never falls back to shard 0,
// because a replica that silently claims shard 0 becomes a second writer of
// that shard.
func ParseOwnership(rawIndex, rawCount string) (Ownership, error) {
	idxS, cntS := strings.TrimSpace(rawIndex), strings.TrimSpace(rawCount)
	switch {
	case idxS == "" && cntS == "":
		return SingleOwner, nil
	case idxS == "":
		return Ownership{}, &ConfigError{Index: rawIndex, Count: rawCount, Reason: "shard count is set but shard index is not (set both or neither)"}
	case cntS == "":
		return Ownership{}, &ConfigError{Index: rawIndex, Count: rawCount, Reason: "shard index is set but shard count is not (set both or neither)"}
	}
	idx, err := parseDecimal(idxS)
	if err != nil {
		return Ownership{}, &ConfigError{Index: rawIndex, Count: rawCount, Reason: "shard index " + err.Error()}
	}
	cnt, err := parseDecimal(cntS)
	if err != nil {
		return Ownership{}, &ConfigError{Index: rawIndex, Count: rawCount, Reason: "shard count " + err.Error()}
	}
	o := Ownership{Index: idx, Count: cnt}
	if err := o.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Index, ce.Count = rawIndex, rawCount
		}
		return Ownership{}, err
	}
	return o, nil
}

// OwnershipFromEnv parses NOETL_SHARD_INDEX and NOETL_SHARD_COUNT.
func OwnershipFromEnv() (Ownership, error) {
	return ParseOwnership(os.Getenv(EnvShardIndex), os.Getenv(EnvShardCount))
}

// parseDecimal accepts an optional leading minus and ASCII digits only (no
// "+", no "0x", no underscores), so that a typo is an error, not a number.
func parseDecimal(s string) (int, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a decimal integer", s)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return v, nil
}
