package coldload_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A package-level worker of gocloud's OpenCensus views, started by
		// the emulator clients.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// ctxT is a context that ends with the test, with a generous deadline as a
// hang guard only.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// memBucket opens a memblob bucket behind blobtier, and returns the raw
// *blob.Bucket too so tests can write objects at rest.
func memBucket(t *testing.T) (blobtier.Bucket, *blob.Bucket) {
	t.Helper()
	raw := memblob.OpenBucket(nil)
	b := blobtier.New(raw, blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	return b, raw
}

// event i of a shard: payloads cover HTML characters, quotes, backslashes,
// non-ASCII, U+2028/9 and varied lengths.
func event(shard uint32, i int) localseg.Event {
	payloads := []string{
		"a",
		`<a href="x">&amp; é — 日本</a>`,
		strings.Repeat("z", i%97),
		"line\nbreak \\ \"quoted\"",
		"\u2028\u2029 sep",
	}
	return localseg.Event{
		ExecutionID:   strconv.Itoa(100 + i%7),
		TransactionID: fmt.Sprintf("txn-%d-%d", shard, i),
		Payload:       payloads[i%len(payloads)] + "#" + strconv.Itoa(i),
	}
}

// owner simulates a shard's owner: a local store whose sealed segments it
// uploads itself (as the engine's uploader would) and whose tail it ships
// with the real tailbatch replicator.
type owner struct {
	t         *testing.T
	shard     uint32
	st        *localseg.Store
	b         blobtier.Bucket
	rep       *tailbatch.Replicator
	published map[uint64]bool
	n         int
}

func newOwner(t *testing.T, b blobtier.Bucket, shard uint32, segMax int64) *owner {
	t.Helper()
	dir := localseg.ShardDir(t.TempDir(), int(shard))
	st, err := localseg.Open(dir, localseg.Options{SegmentMaxBytes: segMax})
	if err != nil {
		t.Fatalf("open owner store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return &owner{t: t, shard: shard, st: st, b: b, rep: tailbatch.New(shard, 0, tailbatch.Options{}), published: map[uint64]bool{}}
}

func (o *owner) append(n int) {
	o.t.Helper()
	for range n {
		o.n++
		if _, err := o.st.Append(event(o.shard, o.n)); err != nil {
			o.t.Fatalf("append %d: %v", o.n, err)
		}
	}
}

func (o *owner) seal() {
	o.t.Helper()
	if _, err := o.st.Seal(); err != nil {
		o.t.Fatalf("seal: %v", err)
	}
}

func (o *owner) snapshot() localseg.Snapshot {
	o.t.Helper()
	s, err := o.st.Snapshot()
	if err != nil {
		o.t.Fatalf("snapshot: %v", err)
	}
	return s
}

// sealed returns the sealed segments.
func (o *owner) sealed() []localseg.SegmentInfo {
	var out []localseg.SegmentInfo
	for _, s := range o.snapshot().Segments {
		if s.Sealed {
			out = append(out, s)
		}
	}
	return out
}

// publish uploads every sealed segment not yet uploaded and returns their
// ids.
func (o *owner) publish() []uint64 {
	o.t.Helper()
	var ids []uint64
	for _, s := range o.sealed() {
		if o.published[s.ID] {
			continue
		}
		data, err := o.st.ReadSegment(s.ID)
		if err != nil {
			o.t.Fatalf("read segment %d: %v", s.ID, err)
		}
		if err := o.b.PutIfAbsent(context.Background(), blobtier.SegmentKey(o.shard, s.ID), data, 0); err != nil {
			o.t.Fatalf("upload segment %d: %v", s.ID, err)
		}
		o.published[s.ID] = true
		ids = append(ids, s.ID)
	}
	return ids
}

// ship runs one tail replication pass: tail objects, then the cursor object.
func (o *owner) ship() tailbatch.Result {
	o.t.Helper()
	res, err := o.rep.Replicate(context.Background(), o.st, o.b)
	if err != nil {
		o.t.Fatalf("replicate: %v", err)
	}
	return res
}

func (o *owner) records() []localseg.Record { return allRecords(o.t, o.st) }

// allRecords scans a whole store.
func allRecords(t *testing.T, st *localseg.Store) []localseg.Record {
	t.Helper()
	var out []localseg.Record
	var after uint64
	for {
		p, err := st.Scan(after, 1000)
		if err != nil {
			t.Fatalf("scan after %d: %v", after, err)
		}
		if len(p.Records) == 0 {
			return out
		}
		out = append(out, p.Records...)
		after = p.Records[len(p.Records)-1].Seq
	}
}

// sameRecords fails unless got equals want exactly (sequences, ids,
// payloads, order).
func sameRecords(t *testing.T, got, want []localseg.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// gapless fails unless the records run from first without a hole.
func gapless(t *testing.T, recs []localseg.Record, first uint64) {
	t.Helper()
	for i, r := range recs {
		if r.Seq != first+uint64(i) {
			t.Fatalf("record %d has sequence %d, want %d", i, r.Seq, first+uint64(i))
		}
	}
}

// openRO opens a hydrated store read-only for inspection.
func openRO(t *testing.T, dir string) *localseg.Store {
	t.Helper()
	st, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s read-only: %v", dir, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openRW opens a hydrated store writable, as the new owner would.
func openRW(t *testing.T, dir string) *localseg.Store {
	t.Helper()
	st, err := localseg.Open(dir, localseg.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// target returns a fresh, not yet existing shard directory.
func target(t *testing.T, shard uint32) string {
	return localseg.ShardDir(t.TempDir(), int(shard))
}

// mustHydrate hydrates and fails the test on error.
func mustHydrate(t *testing.T, b coldload.Reader, shard uint32, opts coldload.Options) (string, coldload.Report) {
	t.Helper()
	dir := target(t, shard)
	rep, err := coldload.Hydrate(ctxT(t), b, shard, dir, opts)
	if err != nil {
		t.Fatalf("hydrate shard %d: %v", shard, err)
	}
	return dir, rep
}

// putRaw writes an object straight into the bucket with the given
// metadata (an object at rest, bypassing blobtier's checks).
func putRaw(t *testing.T, raw *blob.Bucket, key string, data []byte, md map[string]string) {
	t.Helper()
	if err := raw.WriteAll(context.Background(), key, data, &blob.WriterOptions{Metadata: md}); err != nil {
		t.Fatalf("write %s at rest: %v", key, err)
	}
}

// rewriteAtRest replaces an object's bytes and keeps its original metadata,
// as bit rot or a truncation at rest would.
func rewriteAtRest(t *testing.T, raw *blob.Bucket, key string, f func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	attrs, err := raw.Attributes(ctx, key)
	if err != nil {
		t.Fatalf("attributes of %s: %v", key, err)
	}
	data, err := raw.ReadAll(ctx, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	putRaw(t, raw, key, f(slices.Clone(data)), attrs.Metadata)
}

// frames encodes frames into one object image.
func frames(t *testing.T, fs ...localseg.Frame) []byte {
	t.Helper()
	var out []byte
	for i := range fs {
		var err error
		out, err = localseg.EncodeFrame(out, &fs[i])
		if err != nil {
			t.Fatalf("encode frame %+v: %v", fs[i], err)
		}
	}
	return out
}

// evFrames returns Event frames for sequences first..last; payload says
// what each holds (so two writers can differ).
func evFrames(first, last uint64, payload func(seq uint64) string) []localseg.Frame {
	var out []localseg.Frame
	for s := first; s <= last; s++ {
		out = append(out, localseg.Frame{Kind: localseg.KindEvent, Seq: s, ExecutionID: "7",
			TransactionID: "txn-" + strconv.FormatUint(s, 10), Payload: payload(s)})
	}
	return out
}

func plain(seq uint64) string { return "p" + strconv.FormatUint(seq, 10) }

func put(t *testing.T, b blobtier.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.PutIfAbsent(context.Background(), key, data, 0); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// putWatermark writes a watermark object with a plain put (memblob has no
// compare-and-swap; watermark.Advance refuses it).
func putWatermark(t *testing.T, b blobtier.Bucket, shard uint32, seq, segment uint64) {
	t.Helper()
	m := watermark.Mark{Seq: seq, Segment: segment, V: 1}
	if err := b.Put(context.Background(), blobtier.WatermarkKey(shard), m.Encode()); err != nil {
		t.Fatalf("put watermark: %v", err)
	}
}

// putCursor writes a cursor object verbatim (it may point anywhere).
func putCursor(t *testing.T, b blobtier.Bucket, shard uint32, c tailbatch.Cursor) {
	t.Helper()
	data, err := tailbatch.EncodeCursor(c)
	if err != nil {
		t.Fatalf("encode cursor: %v", err)
	}
	if err := b.Put(context.Background(), blobtier.CursorKey(shard), data); err != nil {
		t.Fatalf("put cursor: %v", err)
	}
}

// recorder wraps a Reader and records every key read, the listings, and
// the most reads in flight at once. gate, when set, is called inside every
// Get (to hold reads open).
type recorder struct {
	coldload.Reader
	mu       sync.Mutex
	gets     []string
	inflight atomic.Int64
	peak     atomic.Int64
	gate     func(key string)
	fail     func(key string) error
}

func (r *recorder) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	r.mu.Lock()
	r.gets = append(r.gets, key)
	r.mu.Unlock()
	n := r.inflight.Add(1)
	defer r.inflight.Add(-1)
	for {
		p := r.peak.Load()
		if n <= p || r.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if r.fail != nil {
		if err := r.fail(key); err != nil {
			return nil, blobtier.Meta{}, err
		}
	}
	if r.gate != nil {
		r.gate(key)
	}
	return r.Reader.Get(ctx, key)
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.gets)
}

func (r *recorder) List(ctx context.Context, shard uint32, kind blobtier.Kind) iter.Seq2[blobtier.ObjectInfo, error] {
	return r.Reader.List(ctx, shard, kind)
}

// writeCounter wraps a whole Bucket and counts every write request.
type writeCounter struct {
	blobtier.Bucket
	writes atomic.Int64
}

func (w *writeCounter) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	w.writes.Add(1)
	return w.Bucket.PutIfAbsent(ctx, key, data, epoch)
}
func (w *writeCounter) Put(ctx context.Context, key string, data []byte) error {
	w.writes.Add(1)
	return w.Bucket.Put(ctx, key, data)
}
func (w *writeCounter) CompareAndSwap(ctx context.Context, key string, data []byte, v blobtier.Version) error {
	w.writes.Add(1)
	return w.Bucket.CompareAndSwap(ctx, key, data, v)
}
func (w *writeCounter) Delete(ctx context.Context, key string) error {
	w.writes.Add(1)
	return w.Bucket.Delete(ctx, key)
}

// segmentFiles lists the segment ids in a store directory.
func segmentFiles(t *testing.T, dir string) []uint64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var ids []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "seg-") || !strings.HasSuffix(name, ".eslog") {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "seg-"), ".eslog"), 10, 64)
		if err != nil {
			t.Fatalf("segment file name %s: %v", name, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// listed returns every key of a kind of a shard in the bucket.
func listed(t *testing.T, b blobtier.Bucket, shard uint32, kind blobtier.Kind) []blobtier.ObjectInfo {
	t.Helper()
	var out []blobtier.ObjectInfo
	for info, err := range b.List(context.Background(), shard, kind) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		out = append(out, info)
	}
	return out
}

func mustErrIs(t *testing.T, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %v does not match %v", err, target)
		}
	}
}

func mustContain(t *testing.T, err error, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not name %q", err, s)
		}
	}
}

// absentOrEmpty fails unless dir does not exist or is an empty directory.
func absentOrEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	if len(ents) > 0 {
		t.Fatalf("%s holds %d entries after a failed restore", dir, len(ents))
	}
}

// noLeftovers fails if a .hydrating directory is left next to dir.
func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".hydrating")
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover %s: %v", tmp, err)
	}
}
