package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// NewShard is New for an engine's open: ErrRegistered (reg already holds
// the families of another owner) comes wrapped in usage, the caller's
// usage sentinel.
func NewShard(reg prometheus.Registerer, shard int, usage error) (*Shard, error) {
	m, err := New(reg, shard)
	if errors.Is(err, ErrRegistered) {
		return nil, fmt.Errorf("%w: %v", usage, err)
	}
	return m, err
}

// OutcomeOfClass is the outcome of an operation whose error has class
// token class (bucketlog.Class): ok and not_in_bucket (durable locally)
// are ok, usage counts as invalid input, and every other class (storage,
// fenced, invariant) as storage.
func OutcomeOfClass(class string) Outcome {
	switch class {
	case "ok", "not_in_bucket":
		return OutcomeOK
	case "invalid_input", "usage":
		return OutcomeInvalidInput
	case "invalid_state":
		return OutcomeInvalidState
	case "not_owner":
		return OutcomeNotOwner
	}
	return OutcomeStorage
}
