package fencing

import (
	"errors"
	"fmt"
)

// ErrFenced: a newer ownership epoch of the shard was claimed, so this
// writer is a stale owner. Every write it is asked for is refused; it
// never claims again by itself. Errors of this class are *FencedError.
var ErrFenced = errors.New("bucketlog: fenced: a newer owner claimed the shard")

// FencedError says which writer was fenced and by which claim.
type FencedError struct {
	Shard    uint32
	Epoch    uint64 // this writer's epoch
	Claimant uint64 // the epoch whose claim fenced it (at least Epoch+1)
	// Detail says what was refused or found (a key, a sequence range).
	Detail string
}

func (e *FencedError) Error() string {
	s := fmt.Sprintf("%v (shard %d: this writer owns epoch %d, epoch %d is claimed)", ErrFenced, e.Shard, e.Epoch, e.Claimant)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes errors.Is(err, ErrFenced) hold for every *FencedError.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }
