package tailbatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// Hooks.AfterUpload (the fence HEAD) runs once the put was accepted,
// beside the read-back: a synchronous group waits for max(read-back, HEAD)
// after its put, not for their sum.

// TestAfterUploadRunsBesideTheReadBack: the read-back cannot finish until
// AfterUpload has started; the batch still commits, and AfterUpload never
// starts before the put was accepted.
func TestAfterUploadRunsBesideTheReadBack(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	tip := appendN(t, s, 5)
	var put atomic.Bool
	started := make(chan struct{})
	b.setAfter(func(op, key string) error {
		if op == opPutIfAbsent {
			put.Store(true)
		}
		return nil
	})
	b.setBefore(func(op, key string) error {
		if op != opGet {
			return nil
		}
		select {
		case <-started:
			return nil
		case <-time.After(hangGuard):
			return errors.New("the read-back waited for AfterUpload, which never started")
		}
	})
	var early atomic.Bool
	r := tailbatch.New(0, 0, tailbatch.Options{})
	res, err := r.ReplicateWith(ctx, s, b, tailbatch.Hooks{AfterUpload: func(tailbatch.Batch) error {
		early.Store(!put.Load())
		close(started)
		return nil
	}})
	if err != nil || res.ShippedThrough != tip {
		t.Fatalf("pass: %+v, %v", res, err)
	}
	if early.Load() {
		t.Fatal("AfterUpload started before the put was accepted")
	}
}

// TestAfterUploadFailureOrReadBackFailureCommitsNothing: either side
// failing fails the batch; a read-back that finds damaged bytes puts again
// and runs AfterUpload again after that put.
func TestAfterUploadFailureOrReadBackFailureCommitsNothing(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		fence    error
		getFails bool
	}{{"fence check fails", errors.New("HEAD failed"), false}, {"read-back fails", nil, true}} {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t, localseg.Options{})
			b := newTestBucket(newMemBucket(t))
			appendN(t, s, 3)
			if c.getFails {
				b.setBefore(func(op, key string) error {
					if op == opGet {
						return fmt.Errorf("read-back: %w", errRefused)
					}
					return nil
				})
			}
			var ran, committed atomic.Int32
			r := tailbatch.New(0, 0, tailbatch.Options{})
			res, err := r.ReplicateWith(ctx, s, b, tailbatch.Hooks{
				AfterUpload: func(tailbatch.Batch) error { ran.Add(1); return c.fence },
				Committed:   func(tailbatch.Batch) { committed.Add(1) },
			})
			if err == nil || res.ShippedThrough != 0 || committed.Load() != 0 {
				t.Fatalf("pass: %+v, %v, %d committed; want a failed batch", res, err, committed.Load())
			}
			if ran.Load() != 1 {
				t.Fatalf("AfterUpload ran %d times, want 1", ran.Load())
			}
		})
	}
}

// TestAfterUploadRunsAgainAfterARePut: an object of ours that reads back
// damaged is deleted and put again; the check that follows a put must
// follow that second put too.
func TestAfterUploadRunsAgainAfterARePut(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{})
	b := newTestBucket(newMemBucket(t))
	appendN(t, s, 3)
	var gets atomic.Int32
	b.setAfter(func(op, key string) error {
		if op == opGet && gets.Add(1) <= 2 {
			return fmt.Errorf("injected: %w", blobtier.ErrCorrupt)
		}
		return nil
	})
	var ran atomic.Int32
	r := tailbatch.New(0, 0, tailbatch.Options{})
	res, err := r.ReplicateWith(ctx, s, b, tailbatch.Hooks{AfterUpload: func(tailbatch.Batch) error { ran.Add(1); return nil }})
	if err != nil || res.ShippedThrough != 3 {
		t.Fatalf("pass: %+v, %v", res, err)
	}
	if puts := b.count(opPutIfAbsent); puts != 2 || ran.Load() != 2 {
		t.Fatalf("%d puts, AfterUpload ran %d times; want 2 and 2 (once after each put)", puts, ran.Load())
	}
}
