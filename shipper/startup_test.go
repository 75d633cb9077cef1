package shipper_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/shipper"
	"github.com/bucketlog/bucketlog/takeover"
)

// TestRetryStartupRefusesAFencedVerdictAtOnce: a fenced verdict at start (a
// newer claim found by the start-up check) or a stale owner's disk is
// returned by the first attempt, not retried until the start-up timeout;
// a failed bucket request is retried.
func TestRetryStartupRefusesAFencedVerdictAtOnce(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, verdict := range []error{&fencing.FencedError{Shard: 0, Epoch: 1, Claimant: 2}, takeover.ErrStaleOwner} {
		calls := 0
		err := shipper.RetryStartup(context.Background(), time.Hour, log, "checking the bucket", func() error {
			calls++
			if calls > 3 {
				return nil // retried: a later attempt "passes"
			}
			return verdict
		}, nil)
		if calls != 1 || !errors.Is(err, verdict) {
			t.Errorf("%v: %d attempts, err %v; want 1 attempt and the verdict", verdict, calls, err)
		}
	}
	calls := 0
	err := shipper.RetryStartup(context.Background(), time.Hour, log, "checking the bucket", func() error {
		if calls++; calls == 1 {
			return &blobtier.ObjectError{Op: blobtier.OpList, Key: "noetl.ehdb.", Err: errors.New("503 Service Unavailable")}
		}
		return nil
	}, nil)
	if err != nil || calls != 2 {
		t.Fatalf("a failed bucket request: %d attempts, err %v; want a retry that passes", calls, err)
	}
}
