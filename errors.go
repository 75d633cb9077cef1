package bucketlog

import (
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/shipper"
)

// Errors of the engine: one taxonomy. Each class but storage has one
// sentinel, and Class(err) is that class exactly when errors.Is(err, its
// sentinel) holds, whichever package the error comes from: the lower
// packages' errors wrap these same values (localseg's invalid input and
// invalid state, affinity's not-owner and usage). Storage is the class of
// every other error (a disk or bucket I/O error, corruption, a poisoned
// store, a second writer): it has no sentinel, because an error of the
// operating system or of a bucket SDK cannot carry one.
var (
	// ErrUsage: a bad option or flag value, an invalid shard pair, a bad
	// bucket URL, a shipping store opened without its bucket.
	ErrUsage = affinity.ErrUsage
	// ErrInvalidInput: an event or identifier the log refuses (empty or
	// too long an id, invalid UTF-8, an event too large).
	ErrInvalidInput = localseg.ErrInvalidInput
	// ErrInvalidState: the request does not fit the state (an unknown
	// consumer, an ack past the tip, a locked store, a stale or diverged
	// disk, restore into a non-empty directory, a gap in the bucket...).
	ErrInvalidState = localseg.ErrInvalidState
	// ErrNotOwner: another shard owns the execution or the shard; the
	// error is an *affinity.NotOwnerError and OwnerShard names the owner.
	ErrNotOwner = affinity.ErrNotOwner
	// ErrNotInBucket: synchronous mode only. The append is durable on the
	// local disk and keeps its sequence; the bucket did not confirm it
	// within the bounded wait. It ships later. A retry with the same
	// transaction id is safe: it is answered, not written again.
	ErrNotInBucket = shipper.ErrNotInBucket
	// ErrInvariant: a drive or verify found a problem.
	ErrInvariant = errors.New("bucketlog: invariant violated")

	// ErrStaleDisk (an ErrInvalidState): the local store is behind what
	// the bucket holds.
	ErrStaleDisk = shipper.ErrStaleDisk
	// ErrDiverged (an ErrInvalidState): the local store and the bucket
	// disagree on a sequence both hold.
	ErrDiverged = shipper.ErrDiverged
	// ErrUnknownConsumer (an ErrInvalidState): no such consumer.
	ErrUnknownConsumer = localseg.ErrUnknownConsumer
	// ErrTooLarge (an ErrInvalidInput): the event exceeds the size limit.
	ErrTooLarge = localseg.ErrTooLarge
	// ErrSecondWriter (storage): a different object already sits under one
	// of this shard's write-once keys; shipping, GC and cleanup stopped.
	ErrSecondWriter = shipper.ErrSecondWriter
	// ErrUnshippedBound (storage): RefuseWhenUnshipped refused an append.
	ErrUnshippedBound = shipper.ErrUnshippedBound
	// ErrPoisoned (storage): a write or fsync failed; reopen the shard.
	ErrPoisoned = localseg.ErrPoisoned
	// ErrNotReady (storage): the engine is not ready (still opening, or
	// stopped).
	ErrNotReady = errors.New("bucketlog: not ready")
	// ErrFenced (fenced): a newer owner claimed the shard; every write is
	// refused (a *FencedError names the shard, our epoch and the claimant's).
	ErrFenced = shipper.ErrFenced
	// ErrClosed (storage): the engine was closed.
	ErrClosed = errors.New("bucketlog: closed")
)

// Class tokens (cmd/bucketlog/doc.go, Errors).
const (
	ClassOK           = "ok"
	ClassInvariant    = "invariant"
	ClassUsage        = "usage"
	ClassInvalidState = "invalid_state"
	ClassInvalidInput = "invalid_input"
	ClassStorage      = "storage"
	ClassNotOwner     = "not_owner"
	ClassNotInBucket  = "not_in_bucket"
	ClassFenced       = "fenced"
)

// FencedError is the error of a fenced writer (shard, epoch, claimant).
type FencedError = fencing.FencedError

// classes is the taxonomy, in the order Class tries it: an error that
// wraps two sentinels (a batch refusal naming an invalid event) takes the
// first.
var classes = []struct {
	class    string
	sentinel error
}{
	{ClassInvariant, ErrInvariant},
	{ClassFenced, ErrFenced},
	{ClassUsage, ErrUsage},
	{ClassNotOwner, ErrNotOwner},
	{ClassNotInBucket, ErrNotInBucket},
	{ClassInvalidInput, ErrInvalidInput},
	{ClassInvalidState, ErrInvalidState},
}

// Class returns the class token of err (ClassOK for nil): the class of the
// first sentinel errors.Is finds in it, else ClassStorage.
func Class(err error) string {
	if err == nil {
		return ClassOK
	}
	for _, c := range classes {
		if errors.Is(err, c.sentinel) {
			return c.class
		}
	}
	return ClassStorage
}

// HTTPStatus is the status of err over the HTTP API (the statuses `bucketlog serve --help` lists).
func HTTPStatus(err error) int {
	switch Class(err) {
	case ClassOK:
		return 200
	case ClassUsage:
		return 400
	case ClassInvalidState:
		if errors.Is(err, ErrUnknownConsumer) {
			return 404
		}
		return 409
	case ClassInvalidInput:
		if errors.Is(err, ErrTooLarge) {
			return 413
		}
		return 400
	case ClassNotOwner:
		return 421
	case ClassNotInBucket:
		return 202
	case ClassFenced:
		return 409
	default:
		return 503
	}
}

// OwnerShard returns the owner named by a not-owner error.
func OwnerShard(err error) (int, bool) {
	var notOwner *affinity.NotOwnerError
	if errors.As(err, &notOwner) {
		return notOwner.Owner, true
	}
	return 0, false
}

func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
}
