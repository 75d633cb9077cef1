package emulator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
)

// emu is what these tests need from an in-process emulator.
type emu interface {
	CreateBucket(name string) error
	OpenBucket(ctx context.Context, name string) (*blob.Bucket, error)
	PutRaw(bucket, key string, data []byte, meta map[string]string) error
	URL(name string) string
	Close() error
}

// backend is one emulator every scenario runs on.
type backend struct {
	name  string
	start func() (emu, error)
}

var backends = []backend{
	{"s3", func() (emu, error) { return emulator.StartS3() }},
	{"gcs", func() (emu, error) { return emulator.StartGCS() }},
}

// bucketName is the bucket every env creates.
const bucketName = "bucketlog-e2e"

// env is one emulator with one bucket, opened through blobtier; with
// faults, the raw bucket is wrapped by a faultbucket first.
type env struct {
	name string
	emu  emu
	fb   *faultbucket.Bucket // nil without faults
	puts *putLog
	b    blobtier.Bucket // puts recorded; what the Logs use
}

func newEnv(t *testing.T, be backend, faults bool) *env {
	t.Helper()
	e, err := be.start()
	if err != nil {
		t.Fatalf("start %s: %v", be.name, err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBucket(bucketName); err != nil {
		t.Fatal(err)
	}
	raw, err := e.OpenBucket(ctxT(t), bucketName)
	if err != nil {
		t.Fatal(err)
	}
	v := &env{name: be.name, emu: e}
	inner := raw
	if faults {
		v.fb = faultbucket.New(raw, 1)
		inner = v.fb.Bucket()
	}
	tb := blobtier.New(inner, blobtier.Options{})
	t.Cleanup(func() { tb.Close() })
	if !tb.CanCAS() {
		t.Fatalf("%s: the bucket cannot compare-and-swap", be.name)
	}
	v.puts = &putLog{Bucket: tb, bytes: map[string]int{}, count: map[string]int{}}
	v.b = v.puts
	return v
}

// putLog records every successful PutIfAbsent per key, so a test can show
// that each byte of a segment was uploaded once.
type putLog struct {
	blobtier.Bucket
	mu    sync.Mutex
	bytes map[string]int
	count map[string]int
}

func (p *putLog) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	err := p.Bucket.PutIfAbsent(ctx, key, data, epoch)
	if err == nil {
		p.mu.Lock()
		p.bytes[key] += len(data)
		p.count[key]++
		p.mu.Unlock()
	}
	return err
}

// segmentPuts returns the bytes put under segment keys of shard and the
// keys put more than once.
func (p *putLog) segmentPuts(shard uint32) (total int64, repeated []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prefix := blobtier.ListPrefix(shard, blobtier.KindSegment)
	for k, n := range p.bytes {
		if strings.HasPrefix(k, prefix) {
			total += int64(n)
			if p.count[k] > 1 {
				repeated = append(repeated, k)
			}
		}
	}
	return total, repeated
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, o bucketlog.Options) *bucketlog.Log {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLogger(t)
	}
	l, err := bucketlog.Open(ctxT(t), o)
	if err != nil {
		t.Fatalf("Open %s shard %d: %v", o.Dir, o.ShardIndex, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// quietLogger keeps the engine's Info lines out of the test output; its
// warnings and errors still show, attributed to the test.
func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func closeLog(t *testing.T, l *bucketlog.Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// execsOf returns n execution ids that shard owns among count shards.
func execsOf(shard, count, n int) []string {
	var out []string
	for i := 1000; len(out) < n; i++ {
		id := fmt.Sprint(i)
		if affinity.ShardFor(id, count) == shard {
			out = append(out, id)
		}
	}
	return out
}

// payloads exercise what must round-trip byte for byte: HTML characters,
// quotes, backslashes, control characters, non-ASCII text, U+2028/U+2029.
var payloadKinds = []string{
	`{"n":%d}`,
	`<a href="x">&amp; é — 日本</a> #%d`,
	"quote \" backslash \\ tab \t line sep \u2028 para sep \u2029 %d",
	"%d \x01\x1f emoji 🦀 and a long tail " + strings.Repeat("x", 64),
}

// event is the i-th event of a deterministic workload over execs.
func event(execs []string, i int) localseg.Event {
	x := execs[i%len(execs)]
	return localseg.Event{
		ExecutionID:   x,
		TransactionID: fmt.Sprintf("txn-%s-%d", x, i),
		Payload:       fmt.Sprintf(payloadKinds[i%len(payloadKinds)], i),
	}
}

// appendN appends events from..to-1 of the workload, in batches of batch
// (1: one Append each), and returns the records they became.
func appendN(t *testing.T, l *bucketlog.Log, execs []string, from, to, batch int) []localseg.Record {
	t.Helper()
	ctx := ctxT(t)
	var out []localseg.Record
	for i := from; i < to; {
		n := min(batch, to-i)
		evs := make([]localseg.Event, n)
		for j := range evs {
			evs[j] = event(execs, i+j)
		}
		var first uint64
		if n == 1 {
			res, err := l.Append(ctx, evs[0])
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			first = res.Seq
		} else {
			res, err := l.AppendBatch(ctx, evs)
			if err != nil {
				t.Fatalf("append batch at %d: %v", i, err)
			}
			if res.Appended != n || res.LastSequence-res.FirstSequence+1 != uint64(n) {
				t.Fatalf("batch at %d: %+v", i, res)
			}
			first = res.FirstSequence
		}
		for j, e := range evs {
			out = append(out, localseg.Record{Seq: first + uint64(j), ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
		}
		i += n
	}
	return out
}

// scanAll returns every retained record of l.
func scanAll(t *testing.T, l *bucketlog.Log) localseg.Page {
	t.Helper()
	p, err := l.Scan(t.Context(), 0, 100000)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if uint64(len(p.Records)) != p.RecordCount {
		t.Fatalf("scan returned %d of %d records: raise the limit", len(p.Records), p.RecordCount)
	}
	return p
}

// sameRecords fails unless got and want are equal record for record:
// sequence, execution id, transaction id and payload byte for byte.
func sameRecords(t *testing.T, what string, got, want []localseg.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.ExecutionID != w.ExecutionID || g.TransactionID != w.TransactionID || !bytes.Equal([]byte(g.Payload), []byte(w.Payload)) {
			t.Fatalf("%s: record %d = %+v, want %+v", what, i, g, w)
		}
	}
}

// openRestored opens a restored (or any) directory read-only through the
// public API and returns its records.
func readOnlyRecords(t *testing.T, root string, shard, count int) localseg.Page {
	t.Helper()
	l, err := bucketlog.Open(ctxT(t), bucketlog.Options{Dir: root, ShardIndex: shard, ShardCount: count, ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s read-only: %v", root, err)
	}
	defer l.Close()
	return scanAll(t, l)
}

func restore(t *testing.T, b blobtier.Bucket, shard int, o bucketlog.RestoreOptions) (string, coldload.Report) {
	t.Helper()
	o.Bucket, o.Shard = b, shard
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	rep, err := bucketlog.Restore(ctxT(t), o)
	if err != nil {
		t.Fatalf("restore shard %d: %v", shard, err)
	}
	return o.Dir, rep
}

// objects lists the keys and sizes of one kind of one shard.
func objects(t *testing.T, b blobtier.Bucket, shard uint32, kind blobtier.Kind) []blobtier.ObjectInfo {
	t.Helper()
	var out []blobtier.ObjectInfo
	for info, err := range b.List(ctxT(t), shard, kind) {
		if err != nil {
			t.Fatalf("list %v: %v", kind, err)
		}
		out = append(out, info)
	}
	return out
}

func maxSegmentID(infos []blobtier.ObjectInfo) uint64 {
	var m uint64
	for _, i := range infos {
		m = max(m, i.Parsed.Segment)
	}
	return m
}

func totalSize(infos []blobtier.ObjectInfo) int64 {
	var n int64
	for _, i := range infos {
		n += i.Size
	}
	return n
}

// tailCoverage is the highest sequence the tail objects cover contiguously
// from from (from-1 when none starts at or before it).
func tailCoverage(infos []blobtier.ObjectInfo, from uint64) uint64 {
	tails := slices.Clone(infos)
	slices.SortFunc(tails, func(a, b blobtier.ObjectInfo) int {
		return int(a.Parsed.FirstSeq) - int(b.Parsed.FirstSeq)
	})
	c := from - 1
	for _, tl := range tails {
		if tl.Parsed.FirstSeq > c+1 {
			break
		}
		c = max(c, tl.Parsed.LastSeq)
	}
	return c
}

func snapshot(t *testing.T, l *bucketlog.Log) localseg.Snapshot {
	t.Helper()
	s, err := l.Store().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sealedBytes is the total size of the sealed segments of a snapshot.
func sealedBytes(s localseg.Snapshot) (n int64, count int) {
	for _, seg := range s.Segments {
		if seg.Sealed {
			n += seg.Size
			count++
		}
	}
	return n, count
}

// lastSealedSeq is the last event sequence of the sealed segments.
func lastSealedSeq(s localseg.Snapshot) uint64 {
	last := s.ReclaimedSeq
	for _, seg := range s.Segments {
		if seg.Sealed && seg.Events > 0 {
			last = seg.LastSeq
		}
	}
	return last
}

func destroy(t *testing.T, root string) {
	t.Helper()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still exists: %v", root, err)
	}
}

// copyShard copies a shard directory as a backup would (without its lock).
func copyShard(t *testing.T, srcRoot, dstRoot string, shard int) {
	t.Helper()
	src, dst := localseg.ShardDir(srcRoot, shard), localseg.ShardDir(dstRoot, shard)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// figures logs one line of measurements for the report.
func figures(t *testing.T, start time.Time, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURES %s: %s (%.2fs)", t.Name(), fmt.Sprintf(format, args...), time.Since(start).Seconds())
}
