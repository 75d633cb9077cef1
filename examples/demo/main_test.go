package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle HTTP client connections and gocloud's OpenCensus worker are
		// not the example's and end with the process.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// TestRun runs the example as `go run ./examples/demo` does (smaller): GC
// reclaims on both shards, tail objects carry the events after it, and
// nothing is lost.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, 1000, 100, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"shard 0: consumer acked", "shard 1: restored events", "from tail objects", "nothing lost"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "reclaimed events 1..0 ") {
		t.Errorf("GC reclaimed nothing on a shard:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}

// TestVerifyCatchesLoss is the RED control of the verdict: against a shard
// holding three events (consumer acked 2), an expectation that differs in
// any way is not "nothing lost".
func TestVerifyCatchesLoss(t *testing.T) {
	ctx := context.Background()
	s3 := bucketlogtest.NewS3(t)
	want := map[uint64]string{1: "p1", 2: "p2", 3: "p3"}
	// shard writes the three events to a fresh bucket and directory (verify
	// appends to the shard it checks) and closes it.
	shard := func() bucketlog.Options {
		name, err := s3.NewBucket()
		if err != nil {
			t.Fatal(err)
		}
		o := bucketlog.Options{Dir: t.TempDir(), BucketURL: s3.URL(name)}
		l := bucketlogtest.OpenLog(t, s3, o)
		for seq := uint64(1); seq <= 3; seq++ {
			if _, err := l.Append(ctx, bucketlog.Event{ExecutionID: "order-1", TransactionID: fmt.Sprint("tx-", seq), Payload: want[seq]}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.Pull(ctx, consumer, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Ack(ctx, consumer, 2); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return o
	}
	if err := verify(ctx, shard(), want, 1, 2); err != nil {
		t.Fatalf("a faithful shard: %v", err)
	}
	for label, tc := range map[string]struct {
		want         map[uint64]string
		base, cursor uint64
	}{
		"changed payload": {map[uint64]string{1: "p1", 2: "P2", 3: "p3"}, 1, 2},
		"missing event":   {map[uint64]string{1: "p1", 2: "p2", 3: "p3", 4: "p4"}, 1, 2},
		"wrong base":      {want, 2, 2},
		"cursor lost":     {want, 1, 3},
	} {
		if err := verify(ctx, shard(), tc.want, tc.base, tc.cursor); err == nil {
			t.Errorf("%s: not detected", label)
		} else {
			t.Logf("%s: %v", label, err)
		}
	}
}
