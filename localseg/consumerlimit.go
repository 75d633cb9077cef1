package localseg

import "fmt"

// Consumers are bounded: a pull that would create a consumer beyond
// Options.MaxConsumers is refused with ErrConsumerLimit (an
// ErrInvalidState) and writes nothing, so a stream of pulls under new
// names (a typo loop, or anyone reaching an unauthenticated server) cannot
// grow the consumer state without bound. Consumers that exist are never
// refused, and replay, restore and recovered frames are never limited
// (they only restore what an earlier store accepted). The ceiling keeps
// the bucket's cursor object, which lists every live consumer (a name of
// at most 256 bytes and a 20-digit cursor, at most 280 bytes of JSON
// each), below its 15 MiB object cap by construction.

const (
	// DefaultMaxConsumers is the consumer limit of a shard when
	// Options.MaxConsumers is 0.
	DefaultMaxConsumers = 10_000
	// MaxConsumersCeiling is the highest Options.MaxConsumers accepted:
	// 50,000 consumers of 280 bytes are 14 MB of cursor object.
	MaxConsumersCeiling = 50_000
)

// ErrConsumerLimit refuses a pull that would create one consumer more than
// the shard's limit. It is also an ErrInvalidState.
var ErrConsumerLimit = fmt.Errorf("%w: consumer limit reached", ErrInvalidState)

// consumerLimit resolves Options.MaxConsumers.
func consumerLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultMaxConsumers, nil
	case n < 0 || n > MaxConsumersCeiling:
		return 0, fmt.Errorf("%w: max consumers %d: must be between 1 and %d (the cursor object lists every consumer and stays below 15 MiB)", ErrInvalidInput, n, MaxConsumersCeiling)
	}
	return n, nil
}

// consumerRoomLocked refuses the creation of consumer name when the shard
// holds its limit of consumers (queued creations included).
func (s *Store) consumerRoomLocked(name string) error {
	if len(s.headCons) < s.maxCons {
		return nil
	}
	return fmt.Errorf("%w: the shard holds %d consumers, its limit (Options.MaxConsumers, serve --max-consumers); %s is not created: delete an abandoned consumer or raise the limit", ErrConsumerLimit, len(s.headCons), quoteShort(name))
}
