package blobtier

import (
	"context"
	"errors"
	"iter"
	"time"
)

// Observe decorates b so every request is reported to o once, when it ends:
// one report per call (a Get is one "get" even though it stats and reads;
// a listing is one "list" however many pages it takes). Expected outcomes
// are not errors: a missing object is not_found, a refused conditional write
// (ErrPrecondition, ErrConflict) is precondition. Calls refused before any
// request (ErrTooLarge, ErrBadKey, ErrUnsupported, a closed bucket) are not
// reported. bytesUp counts the payload of every attempted write; bytesDown
// the verified bytes of a successful read. A nil o returns b unchanged.
func Observe(b Bucket, o Observer) Bucket {
	if o == nil {
		return b
	}
	return ObserveTimed(b, func(op Op, res Result, up, down int64, _ time.Duration) { o(op, res, up, down) })
}

// ObserveTimed is Observe with each request's duration (a listing's is the
// time spent waiting on the bucket, not on the caller between pages).
func ObserveTimed(b Bucket, o TimedObserver) Bucket {
	if o == nil {
		return b
	}
	return &observed{b: b, o: o}
}

// TimedObserver is an Observer that is also told how long the request took.
type TimedObserver func(op Op, res Result, bytesUp, bytesDown int64, d time.Duration)

type observed struct {
	b Bucket
	o TimedObserver
}

// ResultOf is the metrics label of a call that returned err.
func ResultOf(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrNotFound):
		return ResultNotFound
	case errors.Is(err, ErrPrecondition), errors.Is(err, ErrConflict):
		return ResultPrecondition
	}
	return ResultError
}

// requested reports whether a call that returned err reached the bucket.
func requested(err error) bool {
	return !(errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadKey) ||
		errors.Is(err, ErrUnsupported) || errors.Is(err, ErrBadRange) || errors.Is(err, ErrClosed) || errors.Is(err, errNilBucket))
}

func (w *observed) report(op Op, err error, up, down int64, start time.Time) {
	if requested(err) {
		w.o(op, ResultOf(err), up, down, time.Since(start))
	}
}

func (w *observed) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	start := time.Now()
	err := w.b.PutIfAbsent(ctx, key, data, epoch)
	w.report(OpPut, err, int64(len(data)), 0, start)
	return err
}

func (w *observed) Put(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	err := w.b.Put(ctx, key, data)
	w.report(OpPut, err, int64(len(data)), 0, start)
	return err
}

func (w *observed) CompareAndSwap(ctx context.Context, key string, data []byte, expect Version) error {
	start := time.Now()
	err := w.b.CompareAndSwap(ctx, key, data, expect)
	w.report(OpCAS, err, int64(len(data)), 0, start)
	return err
}

func (w *observed) Get(ctx context.Context, key string) ([]byte, Meta, error) {
	start := time.Now()
	data, m, err := w.b.Get(ctx, key)
	w.report(OpGet, err, 0, int64(len(data)), start)
	return data, m, err
}

func (w *observed) GetVersioned(ctx context.Context, key string) ([]byte, Version, error) {
	start := time.Now()
	data, v, err := w.b.GetVersioned(ctx, key)
	w.report(OpGet, err, 0, int64(len(data)), start)
	return data, v, err
}

func (w *observed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	start := time.Now()
	info, err := w.b.Stat(ctx, key)
	w.report(OpStat, err, 0, 0, start)
	return info, err
}

func (w *observed) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := w.b.Delete(ctx, key)
	w.report(OpDelete, err, 0, 0, start)
	return err
}

func (w *observed) List(ctx context.Context, shard uint32, kind Kind) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		var last error
		var spent time.Duration
		mark := time.Now()
		defer func() {
			if requested(last) {
				w.o(OpList, ResultOf(last), 0, 0, spent)
			}
		}()
		for info, err := range w.b.List(ctx, shard, kind) {
			spent += time.Since(mark)
			last = err
			if !yield(info, err) {
				return
			}
			mark = time.Now()
		}
		spent += time.Since(mark)
	}
}

func (w *observed) CanCAS() bool { return w.b.CanCAS() }
func (w *observed) Close() error { return w.b.Close() }
