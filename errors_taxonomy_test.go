package bucketlog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
)

// TestClassAgreesWithErrorsIs: for representative errors of every package
// that can reach a caller, Class(err) is c exactly when errors.Is(err,
// the sentinel of c), and storage errors match no sentinel.
func TestClassAgreesWithErrorsIs(t *testing.T) {
	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), ShardCount: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, ackUnknown := l.Ack(ctx, "nobody", 1)
	_, badEvent := l.Append(ctx, bucketlog.Event{ExecutionID: "", TransactionID: "t", Payload: "x"})
	foreign := "1"
	for l.Ownership().Owns(foreign) {
		foreign += "1"
	}
	_, notOwner := l.Append(ctx, bucketlog.Event{ExecutionID: foreign, TransactionID: "t", Payload: "x"})
	_, pairErr := affinity.ParseOwnership("3", "")
	_, badOpen := bucketlog.Open(ctx, bucketlog.Options{ShardIndex: 3, ShardCount: 2})
	_, lockErr := bucketlog.Open(ctx, bucketlog.Options{Dir: l.Dir()[:len(l.Dir())-len("/shard-0000")], ShardCount: 2, Logger: quiet})
	_, restoreGap := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Dir: t.TempDir(), Bucket: emptyBucket(t)})

	cases := []struct {
		name string
		err  error
		want string
	}{
		{"root invariant", fmt.Errorf("drive: %w", bucketlog.ErrInvariant), bucketlog.ClassInvariant},
		{"root usage: bad shard pair", badOpen, bucketlog.ClassUsage},
		{"affinity config", pairErr, bucketlog.ClassUsage},
		{"affinity ErrConfig", affinity.ErrConfig, bucketlog.ClassUsage},
		{"not owner", notOwner, bucketlog.ClassNotOwner},
		{"affinity NotOwnerError", &affinity.NotOwnerError{Owner: 1}, bucketlog.ClassNotOwner},
		{"shipper not in bucket", fmt.Errorf("append: %w", bucketlog.ErrNotInBucket), bucketlog.ClassNotInBucket},
		{"localseg invalid event", badEvent, bucketlog.ClassInvalidInput},
		{"localseg too large", localseg.ErrTooLarge, bucketlog.ClassInvalidInput},
		{"localseg unknown consumer", ackUnknown, bucketlog.ClassInvalidState},
		{"localseg locked", lockErr, bucketlog.ClassInvalidState},
		{"localseg lost state", localseg.ErrLostState, bucketlog.ClassInvalidState},
		{"shipper stale disk", bucketlog.ErrStaleDisk, bucketlog.ClassInvalidState},
		{"shipper diverged", bucketlog.ErrDiverged, bucketlog.ClassInvalidState},
		{"restore of an empty bucket", restoreGap, bucketlog.ClassInvalidState},
		{"coldload watermark ahead", &coldload.WatermarkAheadError{}, bucketlog.ClassInvalidState},
		{"localseg corrupt", &localseg.CorruptionError{Segment: 1, Offset: 1}, bucketlog.ClassStorage},
		{"localseg poisoned", bucketlog.ErrPoisoned, bucketlog.ClassStorage},
		{"blobtier corrupt", blobtier.ErrCorrupt, bucketlog.ClassStorage},
		{"coldload conflict", &coldload.ConflictError{Seq: 1}, bucketlog.ClassStorage},
		{"shipper second writer", bucketlog.ErrSecondWriter, bucketlog.ClassStorage},
		{"root closed", bucketlog.ErrClosed, bucketlog.ClassStorage},
		{"an I/O error", errors.New("read: connection reset"), bucketlog.ClassStorage},
	}
	sentinels := map[string]error{
		bucketlog.ClassInvariant:    bucketlog.ErrInvariant,
		bucketlog.ClassUsage:        bucketlog.ErrUsage,
		bucketlog.ClassNotOwner:     bucketlog.ErrNotOwner,
		bucketlog.ClassNotInBucket:  bucketlog.ErrNotInBucket,
		bucketlog.ClassInvalidInput: bucketlog.ErrInvalidInput,
		bucketlog.ClassInvalidState: bucketlog.ErrInvalidState,
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		got := bucketlog.Class(c.err)
		if got != c.want {
			t.Errorf("%s: Class(%v) = %s, want %s", c.name, c.err, got, c.want)
		}
		for class, s := range sentinels {
			if is := errors.Is(c.err, s); is != (got == class) {
				t.Errorf("%s: Class = %s but errors.Is(err, sentinel of %s) = %v (%v)", c.name, got, class, is, c.err)
			}
		}
	}
}

func emptyBucket(t *testing.T) bucketlog.Bucket {
	t.Helper()
	b, err := blobtier.Open(context.Background(), "mem://taxonomy-empty", blobtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
