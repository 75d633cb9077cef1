package blobtier_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
)

type report struct {
	op       blobtier.Op
	res      blobtier.Result
	up, down int64
}

type recorder struct {
	mu  sync.Mutex
	got []report
}

func (r *recorder) observe(op blobtier.Op, res blobtier.Result, up, down int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, report{op, res, up, down})
}

func (r *recorder) take() []report {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func TestObserveReportsEveryRequest(t *testing.T) {
	ctx := context.Background()
	raw := memblob.OpenBucket(nil)
	var r recorder
	b := blobtier.Observe(blobtier.New(raw, blobtier.Options{}), r.observe)
	defer b.Close()
	key := blobtier.SegmentKey(1, 1)
	data := []byte("0123456789")
	steps := []struct {
		name string
		call func() error
		want []report
	}{
		{"put", func() error { return b.PutIfAbsent(ctx, key, data, 0) }, []report{{blobtier.OpPut, blobtier.ResultOK, 10, 0}}},
		{"identical re-put", func() error { return b.PutIfAbsent(ctx, key, data, 0) }, []report{{blobtier.OpPut, blobtier.ResultOK, 10, 0}}},
		{"conflicting re-put", func() error {
			if err := b.PutIfAbsent(ctx, key, []byte("other"), 0); !errors.Is(err, blobtier.ErrConflict) {
				return fmt.Errorf("got %v", err)
			}
			return nil
		}, []report{{blobtier.OpPut, blobtier.ResultPrecondition, 5, 0}}},
		{"get", func() error { _, _, err := b.Get(ctx, key); return err }, []report{{blobtier.OpGet, blobtier.ResultOK, 0, 10}}},
		{"get versioned", func() error { _, _, err := b.GetVersioned(ctx, key); return err }, []report{{blobtier.OpGet, blobtier.ResultOK, 0, 10}}},
		{"get missing", func() error {
			if _, _, err := b.Get(ctx, blobtier.SegmentKey(1, 2)); !errors.Is(err, blobtier.ErrNotFound) {
				return fmt.Errorf("got %v", err)
			}
			return nil
		}, []report{{blobtier.OpGet, blobtier.ResultNotFound, 0, 0}}},
		{"stat", func() error { _, err := b.Stat(ctx, key); return err }, []report{{blobtier.OpStat, blobtier.ResultOK, 0, 0}}},
		{"list", func() error {
			for _, err := range b.List(ctx, 1, blobtier.KindSegment) {
				if err != nil {
					return err
				}
			}
			return nil
		}, []report{{blobtier.OpList, blobtier.ResultOK, 0, 0}}},
		{"put cursor", func() error { return b.Put(ctx, blobtier.CursorKey(1), []byte(`{"v":1}`)) }, []report{{blobtier.OpPut, blobtier.ResultOK, 7, 0}}},
		{"delete", func() error { return b.Delete(ctx, key) }, []report{{blobtier.OpDelete, blobtier.ResultOK, 0, 0}}},
		{"corrupt get", func() error {
			if err := raw.WriteAll(ctx, key, []byte("x"), nil); err != nil {
				return err
			}
			if _, _, err := b.Get(ctx, key); !errors.Is(err, blobtier.ErrCorrupt) {
				return fmt.Errorf("got %v", err)
			}
			return nil
		}, []report{{blobtier.OpGet, blobtier.ResultError, 0, 0}}},
		// Refused before any request: nothing to count.
		{"too large", func() error {
			if err := b.PutIfAbsent(ctx, blobtier.SegmentKey(1, 3), make([]byte, blobtier.MaxObjectBytes+1), 0); !errors.Is(err, blobtier.ErrTooLarge) {
				return fmt.Errorf("got %v", err)
			}
			return nil
		}, nil},
		{"unsupported cas", func() error {
			if err := b.CompareAndSwap(ctx, blobtier.CursorKey(1), []byte("x"), ""); !errors.Is(err, blobtier.ErrUnsupported) {
				return fmt.Errorf("got %v", err)
			}
			return nil
		}, nil},
	}
	for _, s := range steps {
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := r.take(); !slices.Equal(got, s.want) {
			t.Fatalf("%s: reported %+v, want %+v", s.name, got, s.want)
		}
	}
}

func TestObserveCASPrecondition(t *testing.T) {
	s := startS3(t)
	if err := s.CreateBucket("obs"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var r recorder
	b := blobtier.Observe(mustOpen(t, s.URL("obs"), blobtier.Options{}), r.observe)
	defer b.Close()
	key := blobtier.WatermarkKey(0)
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":1}`), ""); err != nil {
		t.Fatal(err)
	}
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":2}`), ""); !errors.Is(err, blobtier.ErrPrecondition) {
		t.Fatal(err)
	}
	want := []report{{blobtier.OpCAS, blobtier.ResultOK, 7, 0}, {blobtier.OpCAS, blobtier.ResultPrecondition, 7, 0}}
	if got := r.take(); !slices.Equal(got, want) {
		t.Fatalf("reported %+v, want %+v", got, want)
	}
}

func TestResultOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want blobtier.Result
	}{
		{nil, blobtier.ResultOK},
		{fmt.Errorf("x: %w", blobtier.ErrNotFound), blobtier.ResultNotFound},
		{&blobtier.ObjectError{Op: blobtier.OpCAS, Key: "k", Err: blobtier.ErrPrecondition}, blobtier.ResultPrecondition},
		{blobtier.ErrConflict, blobtier.ResultPrecondition},
		{blobtier.ErrCorrupt, blobtier.ResultError},
		{context.DeadlineExceeded, blobtier.ResultError},
	} {
		if got := blobtier.ResultOf(c.err); got != c.want {
			t.Errorf("ResultOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
