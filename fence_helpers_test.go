package bucketlog

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/frame"
)

// Writer-fencing test support: one shared compare-and-swap bucket, a
// per-writer view of it with hooks before and after each request (block,
// fail, or drop the response after success) and a request counter, and an
// oracle that reads the final bucket under the lineage rule.

// casBucket is a shared in-memory bucket with create-if-absent and CAS.
func casBucket(t *testing.T) blobtier.Bucket {
	t.Helper()
	b := blobtier.New(memcas.OpenBucket(nil), blobtier.Options{Timeout: 5 * time.Second})
	t.Cleanup(func() { b.Close() })
	return b
}

// writerView is one writer's view of the shared bucket.
type writerView struct {
	blobtier.Bucket
	noCAS bool // present the bucket as one that cannot fence (file://, mem://)

	mu sync.Mutex
	// before runs before a request (op, key); an error fails it unsent.
	before func(op blobtier.Op, key string) error
	// after runs after a request; it may replace the result (a lost
	// response: the request took effect, the caller sees an error).
	after  func(op blobtier.Op, key string, err error) error
	counts map[string]int // "op kind" → requests
}

func newView(b blobtier.Bucket) *writerView { return &writerView{Bucket: b, counts: map[string]int{}} }

func (v *writerView) hooks() (func(blobtier.Op, string) error, func(blobtier.Op, string, error) error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.before, v.after
}

func (v *writerView) setHooks(before func(blobtier.Op, string) error, after func(blobtier.Op, string, error) error) {
	v.mu.Lock()
	v.before, v.after = before, after
	v.mu.Unlock()
}

func kindOf(key string) string {
	k, err := blobtier.ParseKey(key)
	if err != nil {
		return "?"
	}
	return k.Kind.String()
}

func (v *writerView) do(op blobtier.Op, key string, f func() error) error {
	v.mu.Lock()
	v.counts[string(op)+" "+kindOf(key)]++
	v.mu.Unlock()
	before, after := v.hooks()
	if before != nil {
		if err := before(op, key); err != nil {
			return err
		}
	}
	err := f()
	if after != nil {
		err = after(op, key, err)
	}
	return err
}

// count returns the requests of op on keys of kind ("" = every kind).
func (v *writerView) count(op blobtier.Op, kind string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for k, c := range v.counts {
		o, kd, _ := strings.Cut(k, " ")
		if o == string(op) && (kind == "" || kd == kind) {
			n += c
		}
	}
	return n
}

func (v *writerView) total() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, c := range v.counts {
		n += c
	}
	return n
}

func (v *writerView) resetCounts() {
	v.mu.Lock()
	v.counts = map[string]int{}
	v.mu.Unlock()
}

func (v *writerView) CanCAS() bool { return !v.noCAS && v.Bucket.CanCAS() }

func (v *writerView) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	return v.do(blobtier.OpPut, key, func() error { return v.Bucket.PutIfAbsent(ctx, key, data, epoch) })
}

func (v *writerView) Stat(ctx context.Context, key string) (info blobtier.ObjectInfo, err error) {
	err = v.do(blobtier.OpStat, key, func() error { info, err = v.Bucket.Stat(ctx, key); return err })
	return info, err
}

func (v *writerView) Get(ctx context.Context, key string) (data []byte, m blobtier.Meta, err error) {
	err = v.do(blobtier.OpGet, key, func() error { data, m, err = v.Bucket.Get(ctx, key); return err })
	return data, m, err
}

func (v *writerView) GetVersioned(ctx context.Context, key string) (data []byte, ver blobtier.Version, err error) {
	err = v.do(blobtier.OpGet, key, func() error { data, ver, err = v.Bucket.GetVersioned(ctx, key); return err })
	return data, ver, err
}

func (v *writerView) CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error {
	if v.noCAS {
		return fmt.Errorf("%w: test view without CAS", blobtier.ErrUnsupported)
	}
	return v.do(blobtier.OpCAS, key, func() error { return v.Bucket.CompareAndSwap(ctx, key, data, expect) })
}

func (v *writerView) Put(ctx context.Context, key string, data []byte) error {
	return v.do(blobtier.OpPut, key, func() error { return v.Bucket.Put(ctx, key, data) })
}

func (v *writerView) Delete(ctx context.Context, key string) error {
	return v.do(blobtier.OpDelete, key, func() error { return v.Bucket.Delete(ctx, key) })
}

func (v *writerView) List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	v.mu.Lock()
	v.counts[string(blobtier.OpList)+" "+kind.String()]++
	v.mu.Unlock()
	before, _ := v.hooks()
	return func(yield func(blobtier.ObjectInfo, error) bool) {
		if before != nil {
			if err := before(blobtier.OpList, blobtier.ListPrefix(shard, kind)); err != nil {
				yield(blobtier.ObjectInfo{}, err)
				return
			}
		}
		for info, err := range v.Bucket.List(ctx, shard, kind) {
			if !yield(info, err) {
				return
			}
		}
	}
}

func (v *writerView) Close() error { return nil }

// fenceOpts are the options of a test writer on view in dir.
func fenceOpts(dir string, view blobtier.Bucket, sync bool) Options {
	return Options{Dir: dir, Bucket: view, NoBackground: true, SyncToBucket: sync, SyncWait: 5 * time.Second,
		TailInterval: time.Hour, SealMaxAge: -1, Logger: quiet()}
}

// acked records the events a writer acknowledged in sync mode.
type acked map[uint64]string

func (a acked) append(t *testing.T, l *Log, e Event) error {
	t.Helper()
	res, err := l.Append(ctxT(t), e)
	if err == nil {
		a[res.Seq] = ident(e.ExecutionID, e.TransactionID, e.Payload)
	}
	return err
}

// lineageOracle reads every segment and tail object of shard 0 under the
// lineage rule (docs/FORMAT.md, "Writer fencing") and returns the valid
// payload of each sequence. It fails on two valid frames of one sequence
// with different payloads and on a gap.
func lineageOracle(ctx context.Context, b blobtier.Bucket) (map[uint64]string, fencing.Lineage, error) {
	var recs []fencing.StartRecord
	for info, err := range b.List(ctx, 0, blobtier.KindStart) {
		if err != nil {
			return nil, fencing.Lineage{}, err
		}
		data, _, err := b.Get(ctx, info.Key)
		if err != nil {
			return nil, fencing.Lineage{}, err
		}
		r, err := fencing.DecodeStartRecord(data)
		if err != nil {
			return nil, fencing.Lineage{}, err
		}
		recs = append(recs, r)
	}
	lin, err := fencing.Chain(recs)
	if err != nil {
		return nil, lin, err
	}
	got := map[uint64]string{}
	var problems []string
	read := func(kind blobtier.Kind) error {
		for info, err := range b.List(ctx, 0, kind) {
			if err != nil {
				return err
			}
			data, m, err := b.Get(ctx, info.Key)
			if err != nil {
				return err
			}
			if kind == blobtier.KindSegment && lin.SkipSegment(m.Epoch, info.Parsed.Segment) {
				continue
			}
			for f, err := range frame.Frames(data) {
				if err != nil {
					return fmt.Errorf("%s: %w", info.Key, err)
				}
				if f.Kind != frame.KindEvent || !lin.ValidSeq(m.Epoch, f.Seq) {
					continue
				}
				id := ident(f.ExecutionID, f.TransactionID, f.Payload)
				if p, ok := got[f.Seq]; ok && p != id {
					problems = append(problems, fmt.Sprintf("sequence %d has two valid payloads (%s, epoch %d)", f.Seq, info.Key, m.Epoch))
				}
				got[f.Seq] = id
			}
		}
		return nil
	}
	if err := read(blobtier.KindSegment); err != nil {
		return nil, lin, err
	}
	if err := read(blobtier.KindTail); err != nil {
		return nil, lin, err
	}
	seqs := make([]uint64, 0, len(got))
	for s := range got {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i, s := range seqs {
		if s != uint64(i+1) {
			problems = append(problems, fmt.Sprintf("gap: sequence %d follows %d", s, i))
			break
		}
	}
	if len(problems) > 0 {
		return got, lin, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(problems, "; "))
	}
	return got, lin, nil
}

// checkAcked fails unless every acknowledged event is in the oracle's
// bucket with its payload.
func checkAcked(t *testing.T, b blobtier.Bucket, sets ...acked) {
	t.Helper()
	got, _, err := lineageOracle(ctxT(t), b)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	for i, a := range sets {
		for seq, p := range a {
			if got[seq] != p {
				t.Errorf("writer %d acknowledged sequence %d (%s); the bucket's lineage holds %q", i, seq, p, got[seq])
			}
		}
	}
}

func wantFenced(t *testing.T, what string, err error) {
	t.Helper()
	var fe *FencedError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) || Class(err) != ClassFenced || HTTPStatus(err) != 409 {
		t.Fatalf("%s: %v (class %s, HTTP %d), want fenced", what, err, Class(err), HTTPStatus(err))
	}
}

// ident is what the oracle compares per sequence: the whole event.
func ident(exec, txn, payload string) string { return exec + "|" + txn + "|" + payload }
