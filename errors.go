package bucketlog

import (
	"errors"
	"fmt"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/shipper"
)

// Errors of the engine. Callers test them with errors.Is; Class maps any
// error to the class tokens of the command and HTTP contract.
var (
	// ErrUsage: a bad option or flag value, an invalid shard pair, a bad
	// bucket URL, a shipping store opened without its bucket.
	ErrUsage = shipper.ErrUsage
	// ErrNotInBucket: synchronous mode only. The append is durable on the
	// local disk and keeps its sequence; the bucket did not confirm it
	// within the bounded wait. It ships later. Retrying it as a new append
	// would duplicate it.
	ErrNotInBucket = shipper.ErrNotInBucket
	// ErrStaleDisk: the local store is behind what the bucket holds.
	ErrStaleDisk = shipper.ErrStaleDisk
	// ErrDiverged: the local store and the bucket disagree on a sequence
	// both hold.
	ErrDiverged = shipper.ErrDiverged
	// ErrSecondWriter: a different object already sits under one of this
	// shard's write-once keys; shipping, GC and cleanup stopped.
	ErrSecondWriter = shipper.ErrSecondWriter
	// ErrNotReady: the engine is not ready (still opening, or stopped).
	ErrNotReady = errors.New("bucketlog: not ready")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("bucketlog: closed")
	// ErrInvariant: a drive or verify found a problem.
	ErrInvariant = errors.New("bucketlog: invariant violated")
	// ErrInvalidState is the engine's own invalid-state error (restore into
	// a non-empty directory, a gap, nothing found...).
	ErrInvalidState = errors.New("bucketlog: invalid state")
)

// Class tokens of SPEC §9.
const (
	ClassOK           = "ok"
	ClassInvariant    = "invariant"
	ClassUsage        = "usage"
	ClassInvalidState = "invalid_state"
	ClassInvalidInput = "invalid_input"
	ClassStorage      = "storage"
	ClassNotOwner     = "not_owner"
	ClassNotInBucket  = "not_in_bucket"
)

// Class returns the class token of err (ClassOK for nil).
func Class(err error) string {
	var notOwner *affinity.NotOwnerError
	switch {
	case err == nil:
		return ClassOK
	case errors.Is(err, ErrInvariant):
		return ClassInvariant
	case errors.Is(err, ErrUsage), errors.Is(err, affinity.ErrConfig):
		return ClassUsage
	case errors.As(err, &notOwner), errors.Is(err, affinity.ErrNotOwner):
		return ClassNotOwner
	case errors.Is(err, ErrNotInBucket):
		return ClassNotInBucket
	case errors.Is(err, localseg.ErrInvalidInput):
		return ClassInvalidInput
	case errors.Is(err, localseg.ErrInvalidState), errors.Is(err, localseg.ErrLocked),
		errors.Is(err, ErrInvalidState), errors.Is(err, ErrStaleDisk), errors.Is(err, ErrDiverged):
		return ClassInvalidState
	default:
		return ClassStorage
	}
}

// ExitCode is the process exit code of a class (SPEC §9).
func ExitCode(class string) int {
	switch class {
	case ClassOK:
		return 0
	case ClassInvariant:
		return 1
	case ClassUsage:
		return 2
	case ClassInvalidState:
		return 3
	case ClassInvalidInput:
		return 4
	case ClassNotOwner:
		return 6
	case ClassNotInBucket:
		return 7
	default:
		return 5
	}
}

// HTTPStatus is the status of err over the HTTP API (SPEC §9).
func HTTPStatus(err error) int {
	switch Class(err) {
	case ClassOK:
		return 200
	case ClassUsage:
		return 400
	case ClassInvalidState:
		if errors.Is(err, localseg.ErrUnknownConsumer) {
			return 404
		}
		return 409
	case ClassInvalidInput:
		if errors.Is(err, localseg.ErrTooLarge) {
			return 413
		}
		return 400
	case ClassNotOwner:
		return 421
	case ClassNotInBucket:
		return 202
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
