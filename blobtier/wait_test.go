package blobtier

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitUsesTheContextsWait(t *testing.T) {
	var got []time.Duration
	ctx := WithWait(context.Background(), func(ctx context.Context, d time.Duration) error {
		got = append(got, d)
		return ctx.Err()
	})
	start := time.Now()
	if err := Wait(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != time.Hour {
		t.Fatalf("the hook saw %v, want one call with 1h", got)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("Wait waited on the wall clock under WithWait")
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context = %v, want context.Canceled", err)
	}
	if err := Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("a short wait = %v", err)
	}
}
