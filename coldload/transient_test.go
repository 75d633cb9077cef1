package coldload_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/shipper"
	"github.com/bucketlog/bucketlog/takeover"
)

// Only a failed bucket request is retried at start; a local filesystem
// error or a verdict about the data is returned at once.
func TestTransient(t *testing.T) {
	req := func(err error) error { return &blobtier.ObjectError{Op: blobtier.OpGet, Key: "k", Err: err} }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("hydrate: %w", req(errors.New("503 Service Unavailable"))), true},
		{fmt.Errorf("hydrate: %w", req(fmt.Errorf("%w: %w", coldload.ErrGap, errors.New("hole")))), true},
		{&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.EIO}, false},
		{fmt.Errorf("write: %w", syscall.ENOSPC), false},
		{req(blobtier.ErrCorrupt), false},
		{fmt.Errorf("%w: %w", coldload.ErrConflict, req(errors.New("x"))), false},
	} {
		if got := coldload.Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A verdict is never retried even when a bucket request error is in its
// chain: a fenced writer (a newer claim), a stale owner's disk, a stale or
// diverged disk, local corruption, a poisoned store or bad configuration
// is refused at once, not retried until the start-up timeout.
func TestTransientRefusesFencingAndStartVerdicts(t *testing.T) {
	req := &blobtier.ObjectError{Op: blobtier.OpStat, Key: "k", Err: errors.New("200 OK")}
	for _, verdict := range []error{
		&fencing.FencedError{Shard: 1, Epoch: 2, Claimant: 3},
		takeover.ErrStaleOwner,
		shipper.ErrStaleDisk,
		shipper.ErrDiverged,
		localseg.ErrCorrupt,
		localseg.ErrPoisoned,
		affinity.ErrUsage,
	} {
		if err := fmt.Errorf("start: %w (%w)", verdict, req); coldload.Transient(err) {
			t.Errorf("Transient(%v) = true, want false", err)
		}
	}
}
