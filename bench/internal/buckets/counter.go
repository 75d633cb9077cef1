package buckets

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/bucketlog/bucketlog/blobtier"
)

// OpKind is a request's operation and the kind of key it named (0 for a
// key that does not parse).
type OpKind struct {
	Op   blobtier.Op
	Kind blobtier.Kind
}

// Counts is what a Counter saw: every request by operation (from
// blobtier.Observe), the payload bytes moved, and the requests split by the
// kind of key they named (segment, tail, watermark, cursor).
type Counts struct {
	// Requests is every request that reached the bucket.
	Requests int64
	// ByOp counts requests per operation (put, get, list, delete, stat,
	// cas), whatever their result.
	ByOp map[blobtier.Op]int64
	// Errors counts requests whose result was an error (not a not-found or a
	// refused condition, which blobtier.Observe reports as expected
	// outcomes).
	Errors int64
	// Up is the payload of every attempted write; Down the verified bytes of
	// every successful read.
	Up, Down int64
	// ByOpKind splits the requests by operation and kind of key; UpByKind
	// splits Up by the kind of key written.
	ByOpKind map[OpKind]int64
	UpByKind map[blobtier.Kind]int64
}

// Writes is the number of writes (put, put-if-absent, compare-and-swap)
// of keys of kind k.
func (c Counts) Writes(k blobtier.Kind) int64 {
	return c.ByOpKind[OpKind{blobtier.OpPut, k}] + c.ByOpKind[OpKind{blobtier.OpCAS, k}]
}

// Sub returns c minus earlier: what happened between two snapshots.
func (c Counts) Sub(earlier Counts) Counts {
	return Counts{
		Requests: c.Requests - earlier.Requests,
		Errors:   c.Errors - earlier.Errors,
		Up:       c.Up - earlier.Up,
		Down:     c.Down - earlier.Down,
		ByOp:     subMap(c.ByOp, earlier.ByOp),
		ByOpKind: subMap(c.ByOpKind, earlier.ByOpKind),
		UpByKind: subMap(c.UpByKind, earlier.UpByKind),
	}
}

func subMap[K comparable](a, b map[K]int64) map[K]int64 {
	out := map[K]int64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// String lists the non-zero counts by operation and kind, for row notes:
// "cas cursor 3, get segment 2".
func (c Counts) String() string {
	if c.Requests == 0 {
		return "no requests"
	}
	var parts []string
	for ok, n := range c.ByOpKind {
		kind := "unparsed key"
		if ok.Kind != 0 {
			kind = ok.Kind.String()
		}
		parts = append(parts, fmt.Sprintf("%s %s %d", ok.Op, kind, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Counter counts the requests made through the buckets it wraps. The zero
// value is ready; it is safe for concurrent use.
type Counter struct {
	mu sync.Mutex
	c  Counts
}

// Wrap returns b counted: blobtier.Observe reports every request to the
// counter, and a thin layer under it notes the kind of key each request
// named. Close of the result closes b.
func (c *Counter) Wrap(b blobtier.Bucket) blobtier.Bucket {
	return blobtier.Observe(&kindTap{b: b, c: c}, c.observe)
}

// Snapshot returns a copy of the counts so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.c
	out.ByOp = maps.Clone(c.c.ByOp)
	out.ByOpKind = maps.Clone(c.c.ByOpKind)
	out.UpByKind = maps.Clone(c.c.UpByKind)
	return out
}

func (c *Counter) observe(op blobtier.Op, res blobtier.Result, up, down int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c.ByOp == nil {
		c.c.ByOp = map[blobtier.Op]int64{}
	}
	c.c.Requests++
	c.c.ByOp[op]++
	c.c.Up += up
	c.c.Down += down
	if res == blobtier.ResultError {
		c.c.Errors++
	}
}

// note records one request that named key (or, for a listing, kind).
func (c *Counter) note(op blobtier.Op, kind blobtier.Kind, up int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c.ByOpKind == nil {
		c.c.ByOpKind = map[OpKind]int64{}
		c.c.UpByKind = map[blobtier.Kind]int64{}
	}
	c.c.ByOpKind[OpKind{op, kind}]++
	c.c.UpByKind[kind] += int64(up)
}

func kindOf(key string) blobtier.Kind {
	k, err := blobtier.ParseKey(key)
	if err != nil {
		return 0
	}
	return k.Kind
}

// kindTap notes the operation and key kind of every request that reached
// the bucket (the same rule as blobtier.Observe: a call refused before any
// request is not counted, so the two add up), and passes everything
// through.
type kindTap struct {
	b blobtier.Bucket
	c *Counter
}

var _ blobtier.Bucket = (*kindTap)(nil)

// reached mirrors blobtier.Observe's rule.
func reached(err error) bool {
	for _, before := range []error{blobtier.ErrTooLarge, blobtier.ErrBadKey, blobtier.ErrUnsupported, blobtier.ErrClosed} {
		if errors.Is(err, before) {
			return false
		}
	}
	return true
}

func (t *kindTap) noteKey(op blobtier.Op, key string, up int, err error) {
	if reached(err) {
		t.c.note(op, kindOf(key), up)
	}
}

func (t *kindTap) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	err := t.b.PutIfAbsent(ctx, key, data, epoch)
	t.noteKey(blobtier.OpPut, key, len(data), err)
	return err
}

func (t *kindTap) Put(ctx context.Context, key string, data []byte) error {
	err := t.b.Put(ctx, key, data)
	t.noteKey(blobtier.OpPut, key, len(data), err)
	return err
}

func (t *kindTap) CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error {
	err := t.b.CompareAndSwap(ctx, key, data, expect)
	t.noteKey(blobtier.OpCAS, key, len(data), err)
	return err
}

func (t *kindTap) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	data, m, err := t.b.Get(ctx, key)
	t.noteKey(blobtier.OpGet, key, 0, err)
	return data, m, err
}

func (t *kindTap) GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error) {
	data, v, err := t.b.GetVersioned(ctx, key)
	t.noteKey(blobtier.OpGet, key, 0, err)
	return data, v, err
}

func (t *kindTap) Stat(ctx context.Context, key string) (blobtier.ObjectInfo, error) {
	info, err := t.b.Stat(ctx, key)
	t.noteKey(blobtier.OpStat, key, 0, err)
	return info, err
}

func (t *kindTap) Delete(ctx context.Context, key string) error {
	err := t.b.Delete(ctx, key)
	t.noteKey(blobtier.OpDelete, key, 0, err)
	return err
}

func (t *kindTap) List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	return func(yield func(blobtier.ObjectInfo, error) bool) {
		var last error
		defer func() {
			if reached(last) {
				t.c.note(blobtier.OpList, kind, 0)
			}
		}()
		for info, err := range t.b.List(ctx, shard, kind) {
			last = err
			if !yield(info, err) {
				return
			}
		}
	}
}

func (t *kindTap) CanCAS() bool { return t.b.CanCAS() }
func (t *kindTap) Close() error { return t.b.Close() }
