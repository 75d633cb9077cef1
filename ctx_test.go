package bucketlog

import (
	"context"
	"errors"
	"testing"
)

// A cancelled context refuses every method that can reach the disk or the
// bucket before it starts: a pull does not create its consumer.
func TestCancelledContextRefusesBeforeActing(t *testing.T) {
	l := mustOpen(t, Options{Dir: t.TempDir(), NoBackground: true, Logger: quiet()})
	defer l.Close()
	if _, err := l.Append(ctxT(t), ev("1", 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", what, err)
		}
	}
	_, err := l.Scan(ctx, 0, 10)
	check("scan", err)
	_, err = l.ReadExecution(ctx, "1", 0, 10)
	check("read execution", err)
	_, err = l.ScanShard(ctx, 0, 0, 10)
	check("scan shard", err)
	_, err = l.Pull(ctx, "c", 10)
	check("pull", err)
	_, _, err = l.PullBytes(ctx, "c", 10, 0)
	check("pull bytes", err)
	_, err = l.Ack(ctx, "c", 1)
	check("ack", err)
	check("delete consumer", l.DeleteConsumer(ctx, "c"))
	snap, err := l.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Consumers) != 0 {
		t.Errorf("a refused pull created a consumer: %v", snap.Consumers)
	}
}
