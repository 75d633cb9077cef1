package client

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
)

var (
	// ErrStorage is the storage class (HTTP 503 with "class":"storage"): a
	// disk or bucket error, a poisoned or not-ready shard, a body refused
	// for the server's in-flight budget. The engine has no sentinel for
	// it (bucketlog.Class returns ClassStorage for any other error).
	ErrStorage = errors.New("client: storage class")
	// ErrUnavailable: no usable answer (the server could not be reached,
	// the answer was lost or timed out, or a 502/504 or an unclassed 503
	// came from something in front of the server).
	ErrUnavailable = errors.New("client: server unavailable")
)

// Error is a refusal by the server: an answer whose status is not the
// route's success. It is safe to share once returned.
type Error struct {
	// Status is the HTTP status; Class the "class" token of the body
	// (bucketlog.ClassUsage …; empty when the body had none, as a proxy's
	// 502 has not); Message the server's "error".
	Status  int
	Class   string
	Message string
	// OwnerShard is the shard that owns the execution or shard of a 421
	// (HasOwner is true then).
	OwnerShard int
	HasOwner   bool
	// Shard is the shard the answering replica owns, as a 421 names it
	// (-1 when the answer did not: a server older than this client).
	Shard int
	// ExecutionID is the execution the request named, when it named one.
	ExecutionID string
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.HasOwner {
		return fmt.Sprintf("bucketlog: HTTP %d %s: %s (owner shard %d)", e.Status, e.Class, msg, e.OwnerShard)
	}
	if e.Class == "" {
		return fmt.Sprintf("bucketlog: HTTP %d: %s", e.Status, msg)
	}
	return fmt.Sprintf("bucketlog: HTTP %d %s: %s", e.Status, e.Class, msg)
}

// Unwrap gives the sentinels of the class (and of the status where the
// class alone does not say), so errors.Is(err, bucketlog.ErrInvalidState)
// and the like hold as for the engine's own errors; a 421 also gives an
// *affinity.NotOwnerError naming the owner and the replica's own shard
// (Error.Shard). A class this client does not know (a newer server's)
// gives no sentinel; Class still names it.
func (e *Error) Unwrap() []error {
	var errs []error
	switch e.Class {
	case bucketlog.ClassUsage:
		errs = append(errs, bucketlog.ErrUsage)
	case bucketlog.ClassInvalidInput:
		errs = append(errs, bucketlog.ErrInvalidInput)
		if e.Status == http.StatusRequestEntityTooLarge {
			errs = append(errs, bucketlog.ErrTooLarge)
		}
	case bucketlog.ClassInvalidState:
		errs = append(errs, bucketlog.ErrInvalidState)
		if e.Status == http.StatusNotFound {
			errs = append(errs, bucketlog.ErrUnknownConsumer)
		}
	case bucketlog.ClassNotOwner:
		errs = append(errs, bucketlog.ErrNotOwner)
	case bucketlog.ClassNotInBucket:
		errs = append(errs, bucketlog.ErrNotInBucket)
	case bucketlog.ClassInvariant:
		errs = append(errs, bucketlog.ErrInvariant)
	case bucketlog.ClassFenced:
		errs = append(errs, bucketlog.ErrFenced)
	case bucketlog.ClassStorage:
		errs = append(errs, ErrStorage)
	case "":
		if e.Status >= 500 {
			errs = append(errs, ErrUnavailable)
		}
	}
	if e.HasOwner {
		errs = append(errs, &affinity.NotOwnerError{Owner: e.OwnerShard, Shard: e.Shard, ExecutionID: e.ExecutionID})
	}
	return errs
}

// OwnerShard returns the owner shard a 421 named.
func OwnerShard(err error) (int, bool) {
	var e *Error
	if errors.As(err, &e) && e.HasOwner {
		return e.OwnerShard, true
	}
	return 0, false
}

// errorBody is the server's {"error","class","owner_shard","shard"}.
type errorBody struct {
	Error      string `json:"error"`
	Class      string `json:"class"`
	OwnerShard *int   `json:"owner_shard"`
	Shard      *int   `json:"shard"`
}

// owner sets e's owner and answering shard from a 421's body.
func (eb errorBody) owner(e *Error) {
	if eb.OwnerShard == nil {
		return
	}
	e.OwnerShard, e.HasOwner, e.Shard = *eb.OwnerShard, true, -1
	if eb.Shard != nil {
		e.Shard = *eb.Shard
	}
}
