package coldload_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
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
