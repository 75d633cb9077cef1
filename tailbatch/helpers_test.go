package tailbatch_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A package-level worker of OpenCensus views, started by the
		// emulators' storage clients; it lives as long as the process.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// errRefused is what a refusing test bucket answers.
var errRefused = errors.New("test bucket: refused")

// Bucket operations as the test bucket counts them.
const (
	opPutIfAbsent  = "put_if_absent"
	opGet          = "get"
	opGetVersioned = "get_versioned"
	opCAS          = "cas"
	opPut          = "put"
	opList         = "list"
	opStat         = "stat"
	opDelete       = "delete"
)

// testBucket wraps a blobtier.Bucket, counts every request by operation and
// lets a test refuse, block or lose the acknowledgement of any of them.
type testBucket struct {
	inner blobtier.Bucket

	mu    sync.Mutex
	calls map[string]int
	puts  []string // keys of PutIfAbsent calls, in order
	// before runs before a request reaches the inner bucket; a non-nil
	// error refuses it (nothing lands). It may block.
	before func(op, key string) error
	// after runs after a request succeeded on the inner bucket; a non-nil
	// error is returned instead (a lost acknowledgement: it landed).
	after func(op, key string) error
}

var _ blobtier.Bucket = (*testBucket)(nil)

func newTestBucket(inner blobtier.Bucket) *testBucket {
	return &testBucket{inner: inner, calls: map[string]int{}}
}

func (b *testBucket) setBefore(f func(op, key string) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.before = f
}

func (b *testBucket) setAfter(f func(op, key string) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.after = f
}

func (b *testBucket) enter(op, key string) error {
	b.mu.Lock()
	b.calls[op]++
	if op == opPutIfAbsent {
		b.puts = append(b.puts, key)
	}
	before := b.before
	b.mu.Unlock()
	if before != nil {
		return before(op, key)
	}
	return nil
}

func (b *testBucket) leave(op, key string, err error) error {
	if err != nil {
		return err
	}
	b.mu.Lock()
	after := b.after
	b.mu.Unlock()
	if after != nil {
		return after(op, key)
	}
	return nil
}

// total is the number of requests made so far.
func (b *testBucket) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.calls {
		n += c
	}
	return n
}

func (b *testBucket) count(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[op]
}

func (b *testBucket) callsCopy() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.calls)
}

func (b *testBucket) putKeys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.puts)
}

func (b *testBucket) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	if err := b.enter(opPutIfAbsent, key); err != nil {
		return err
	}
	return b.leave(opPutIfAbsent, key, b.inner.PutIfAbsent(ctx, key, data, epoch))
}

func (b *testBucket) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	if err := b.enter(opGet, key); err != nil {
		return nil, blobtier.Meta{}, err
	}
	data, m, err := b.inner.Get(ctx, key)
	return data, m, b.leave(opGet, key, err)
}

func (b *testBucket) GetVersioned(ctx context.Context, key string) ([]byte, blobtier.Version, error) {
	if err := b.enter(opGetVersioned, key); err != nil {
		return nil, "", err
	}
	data, v, err := b.inner.GetVersioned(ctx, key)
	return data, v, b.leave(opGetVersioned, key, err)
}

func (b *testBucket) CompareAndSwap(ctx context.Context, key string, data []byte, expect blobtier.Version) error {
	if err := b.enter(opCAS, key); err != nil {
		return err
	}
	return b.leave(opCAS, key, b.inner.CompareAndSwap(ctx, key, data, expect))
}

func (b *testBucket) Put(ctx context.Context, key string, data []byte) error {
	if err := b.enter(opPut, key); err != nil {
		return err
	}
	return b.leave(opPut, key, b.inner.Put(ctx, key, data))
}

func (b *testBucket) List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	return func(yield func(blobtier.ObjectInfo, error) bool) {
		if err := b.enter(opList, fmt.Sprintf("shard=%d kind=%d", shard, kind)); err != nil {
			yield(blobtier.ObjectInfo{}, err)
			return
		}
		for info, err := range b.inner.List(ctx, shard, kind) {
			if !yield(info, err) {
				return
			}
		}
	}
}

func (b *testBucket) Stat(ctx context.Context, key string) (blobtier.ObjectInfo, error) {
	if err := b.enter(opStat, key); err != nil {
		return blobtier.ObjectInfo{}, err
	}
	info, err := b.inner.Stat(ctx, key)
	return info, b.leave(opStat, key, err)
}

func (b *testBucket) Delete(ctx context.Context, key string) error {
	if err := b.enter(opDelete, key); err != nil {
		return err
	}
	return b.leave(opDelete, key, b.inner.Delete(ctx, key))
}

func (b *testBucket) CanCAS() bool { return b.inner.CanCAS() }
func (b *testBucket) Close() error { return nil }

// refuseAll makes every request fail before it reaches the bucket.
func refuseAll(op, key string) error { return fmt.Errorf("%s %s: %w", op, key, errRefused) }

// newMemBucket is a blobtier.Bucket over a fresh memblob.
func newMemBucket(t testing.TB) blobtier.Bucket {
	t.Helper()
	return newBlobBucket(t, memblob.OpenBucket(nil))
}

// newBlobBucket wraps an opened gocloud bucket and closes both at cleanup.
func newBlobBucket(t testing.TB, bb *blob.Bucket) blobtier.Bucket {
	t.Helper()
	b := blobtier.New(bb, blobtier.Options{})
	if b == nil {
		t.Fatal("blobtier.New returned nil")
	}
	t.Cleanup(func() {
		b.Close()
		bb.Close()
	})
	return b
}

// openStore opens a writable store in a fresh directory.
func openStore(t testing.TB, opts localseg.Options) *localseg.Store {
	t.Helper()
	return openStoreIn(t, t.TempDir(), opts)
}

func openStoreIn(t testing.TB, dir string, opts localseg.Options) *localseg.Store {
	t.Helper()
	s, err := localseg.Open(dir, opts)
	if err != nil {
		t.Fatalf("open store %s: %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// event is the n-th test event; its payload names its sequence so a test
// can check that a recovered event is the one appended.
func event(n int, pad string) localseg.Event {
	return localseg.Event{
		ExecutionID:   strconv.Itoa(100 + n%7),
		TransactionID: fmt.Sprintf("txn-%d", n),
		Payload:       fmt.Sprintf("event %d %s", n, pad),
	}
}

// appendN appends n events and returns the last sequence.
func appendN(t testing.TB, s *localseg.Store, n int) uint64 {
	t.Helper()
	var last uint64
	for range n {
		res, err := s.Append(event(int(s.Tip())+1, ""))
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		last = res.Seq
	}
	return last
}

// uploadSealed puts every sealed segment of s that is not in b yet, the way
// the engine's uploader does, and returns the event ranges now durable.
func uploadSealed(t testing.TB, ctx context.Context, s *localseg.Store, b blobtier.Bucket, shard uint32) []tailbatch.SegRange {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var out []tailbatch.SegRange
	for _, seg := range snap.Segments {
		if !seg.Sealed {
			continue
		}
		data, err := s.ReadSegment(seg.ID)
		if err != nil {
			t.Fatalf("read segment %d: %v", seg.ID, err)
		}
		if err := b.PutIfAbsent(ctx, blobtier.SegmentKey(shard, seg.ID), data, 0); err != nil {
			t.Fatalf("upload segment %d: %v", seg.ID, err)
		}
		out = append(out, tailbatch.SegRange{FirstSeq: seg.FirstSeq, LastSeq: seg.LastSeq})
	}
	return out
}

// bucketEvents decodes every segment and tail object of shard and returns,
// for each event sequence found, its payload (checking that every copy of a
// sequence agrees).
func bucketEvents(t testing.TB, ctx context.Context, b blobtier.Bucket, shard uint32) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for info, err := range b.List(ctx, shard, kind) {
			if err != nil {
				t.Fatalf("list kind %d: %v", kind, err)
			}
			data, _, err := b.Get(ctx, info.Key)
			if err != nil {
				t.Fatalf("get %s: %v", info.Key, err)
			}
			for f, err := range localseg.Frames(data) {
				if err != nil {
					t.Fatalf("frames of %s: %v", info.Key, err)
				}
				if f.Kind != localseg.KindEvent {
					continue
				}
				if prev, ok := out[f.Seq]; ok && prev != f.Payload {
					t.Fatalf("sequence %d has two payloads: %q and %q", f.Seq, prev, f.Payload)
				}
				out[f.Seq] = f.Payload
			}
		}
	}
	return out
}

// missing lists the sequences in 1..through that are not in got.
func missing(got map[uint64]string, through uint64) []uint64 {
	var out []uint64
	for seq := uint64(1); seq <= through; seq++ {
		if _, ok := got[seq]; !ok {
			out = append(out, seq)
		}
	}
	return out
}

// keysOf lists the keys of one kind of one shard.
func keysOf(t testing.TB, ctx context.Context, b blobtier.Bucket, shard uint32, kind blobtier.Kind) []string {
	t.Helper()
	var keys []string
	for info, err := range b.List(ctx, shard, kind) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

// countingSource wraps a Source and counts its calls.
type countingSource struct {
	tailbatch.Source
	mu              sync.Mutex
	extents, ranges int
}

func (c *countingSource) TailExtent(after uint64, maxBytes int64) (localseg.Extent, bool, error) {
	c.mu.Lock()
	c.extents++
	c.mu.Unlock()
	return c.Source.TailExtent(after, maxBytes)
}

func (c *countingSource) ReadRange(segment uint64, off, n int64) ([]byte, error) {
	c.mu.Lock()
	c.ranges++
	c.mu.Unlock()
	return c.Source.ReadRange(segment, off, n)
}

// casStore is an in-memory CursorStore with compare-and-swap, for the cursor
// logic on its own (memblob has no compare-and-swap). Version tokens change
// on every write, like GCS generations.
type casStore struct {
	mu   sync.Mutex
	objs map[string]casObject
	gen  int
	// beforeCAS runs before each CompareAndSwap (outside the mutex) so a
	// test can slip a competing write in.
	beforeCAS func()
	casCalls  int
	noCAS     bool
	putCalls  int
}

type casObject struct {
	data []byte
	ver  blobtier.Version
}

var _ tailbatch.CursorStore = (*casStore)(nil)

func newCASStore() *casStore { return &casStore{objs: map[string]casObject{}} }

func (s *casStore) GetVersioned(_ context.Context, key string) ([]byte, blobtier.Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[key]
	if !ok {
		return nil, "", blobtier.ErrNotFound
	}
	return slices.Clone(o.data), o.ver, nil
}

func (s *casStore) CompareAndSwap(_ context.Context, key string, data []byte, expect blobtier.Version) error {
	if s.noCAS {
		return blobtier.ErrUnsupported
	}
	if f := s.beforeCAS; f != nil {
		f()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.casCalls++
	if s.objs[key].ver != expect {
		return blobtier.ErrPrecondition
	}
	s.setLocked(key, data)
	return nil
}

func (s *casStore) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putCalls++
	s.setLocked(key, data)
	return nil
}

func (s *casStore) setLocked(key string, data []byte) {
	s.gen++
	s.objs[key] = casObject{data: slices.Clone(data), ver: blobtier.Version(strconv.Itoa(s.gen))}
}

func (s *casStore) CanCAS() bool { return !s.noCAS }

func (s *casStore) raw(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.objs[key].data)
}

// rebuildCursor is the tail cursor of shard at start as the engine computes
// it: one bucket view of the shard's tail objects, then CursorFrom.
func rebuildCursor(ctx context.Context, b bucketview.Lister, shard uint32, base uint64, durable []tailbatch.SegRange) (uint64, error) {
	v, err := bucketview.Read(ctx, b, shard, bucketview.Options{Parts: bucketview.Tails})
	if err != nil {
		return 0, err
	}
	return tailbatch.CursorFrom(shard, base, durable, v.TailObjects), nil
}
