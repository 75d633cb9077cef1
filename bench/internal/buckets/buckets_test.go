package buckets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gocloud's OpenCensus views keep a package-level goroutine; idle
		// client connections end when the emulator closes.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

func memBucket(t *testing.T) blobtier.Bucket {
	t.Helper()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	return b
}

// sum adds the per-kind split, which must equal the per-operation total.
func sum(c Counts) int64 {
	var n int64
	for _, v := range c.ByOpKind {
		n += v
	}
	return n
}

// Every request through a wrapped bucket is counted once, under its
// operation and the kind of key it named, and the two splits agree.
func TestCounterCountsEveryRequest(t *testing.T) {
	ctx := context.Background()
	var c Counter
	b := c.Wrap(memBucket(t))
	seg := blobtier.SegmentKey(0, 1)
	tail := blobtier.TailKey(0, 1, 2)
	if err := b.PutIfAbsent(ctx, seg, []byte("segment"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, tail, []byte("tail"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, blobtier.CursorKey(0), []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, seg); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, tail); err != nil {
		t.Fatal(err)
	}
	// A listing stopped early is still one request.
	for _, err := range b.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if err := b.Delete(ctx, tail); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, tail); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("get of a deleted key: %v", err)
	}
	got := c.Snapshot()
	if got.Requests != 8 || sum(got) != got.Requests {
		t.Fatalf("counted %d requests (%d by kind), want 8: %s", got.Requests, sum(got), got)
	}
	want := map[OpKind]int64{
		{blobtier.OpPut, blobtier.KindSegment}:  1,
		{blobtier.OpPut, blobtier.KindTail}:     1,
		{blobtier.OpPut, blobtier.KindCursor}:   1,
		{blobtier.OpGet, blobtier.KindSegment}:  1,
		{blobtier.OpGet, blobtier.KindTail}:     1,
		{blobtier.OpStat, blobtier.KindTail}:    1,
		{blobtier.OpList, blobtier.KindSegment}: 1,
		{blobtier.OpDelete, blobtier.KindTail}:  1,
	}
	for k, n := range want {
		if got.ByOpKind[k] != n {
			t.Errorf("%v: %d, want %d (%s)", k, got.ByOpKind[k], n, got)
		}
	}
	if got.Up != int64(len("segment")+len("tail")+len(`{"v":1}`)) || got.Down != int64(len("segment")) {
		t.Errorf("bytes up %d, down %d", got.Up, got.Down)
	}
	if got.Writes(blobtier.KindTail) != 1 || got.UpByKind[blobtier.KindTail] != 4 {
		t.Errorf("tail writes %d of %d bytes", got.Writes(blobtier.KindTail), got.UpByKind[blobtier.KindTail])
	}
	if got.Errors != 0 {
		t.Errorf("%d errors counted; a not-found is an expected outcome", got.Errors)
	}
	// Sub isolates a window.
	before := c.Snapshot()
	if _, err := b.Stat(ctx, seg); err != nil {
		t.Fatal(err)
	}
	if d := c.Snapshot().Sub(before); d.Requests != 1 || d.ByOpKind[OpKind{blobtier.OpStat, blobtier.KindSegment}] != 1 || len(d.ByOp) != 1 {
		t.Fatalf("window: %+v", d)
	}
}

// A call refused before any request (a key that does not parse) is counted
// by neither half, so they keep adding up.
func TestCounterSkipsCallsThatNeverReachTheBucket(t *testing.T) {
	var c Counter
	b := c.Wrap(memBucket(t))
	if err := b.PutIfAbsent(context.Background(), "not-a-key", []byte("x"), 0); !errors.Is(err, blobtier.ErrBadKey) {
		t.Fatalf("bad key accepted: %v", err)
	}
	if got := c.Snapshot(); got.Requests != 0 || sum(got) != 0 {
		t.Fatalf("a refused call was counted: %s (%d by kind)", got, sum(got))
	}
}

func TestCounterIsSafeForConcurrentUse(t *testing.T) {
	var c Counter
	b := c.Wrap(memBucket(t))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				if err := b.PutIfAbsent(context.Background(), blobtier.SegmentKey(uint32(i), uint64(j+1)), []byte("x"), 0); err != nil {
					t.Error(err)
				}
				_ = c.Snapshot()
			}
		})
	}
	wg.Wait()
	if got := c.Snapshot(); got.Requests != 200 || got.Writes(blobtier.KindSegment) != 200 {
		t.Fatalf("counted %s", got)
	}
}

// Download writes every object to its own file, byte for byte, and reports
// the total.
func TestDownloadWritesEveryObject(t *testing.T) {
	ctx := context.Background()
	objs := map[string][]byte{}
	var keys []string
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, k)
		objs[k] = bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
	}
	get := func(_ context.Context, key string) ([]byte, error) { return objs[key], nil }
	dir := t.TempDir()
	n, err := Download(ctx, get, keys, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i, k := range keys {
		want += int64(len(objs[k]))
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("obj-%06d", i)))
		if err != nil || !bytes.Equal(got, objs[k]) {
			t.Fatalf("object %s: %d bytes, %v", k, len(got), err)
		}
	}
	if n != want {
		t.Fatalf("reported %d bytes, wrote %d", n, want)
	}
}

// RawGet returns every byte of an object, and an error for a missing one.
func TestRawGetReadsWholeObjects(t *testing.T) {
	ctx := context.Background()
	raw := memblob.OpenBucket(nil)
	defer raw.Close()
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	if err := raw.WriteAll(ctx, "k", data, nil); err != nil {
		t.Fatal(err)
	}
	got, err := RawGet(raw)(ctx, "k")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d of %d bytes: %v", len(got), len(data), err)
	}
	if _, err := RawGet(raw)(ctx, "missing"); err == nil {
		t.Fatal("a missing object read as empty")
	}
}

// The limit runs exactly conc reads at once: a serial loop would be a
// lower bar than the restore it is compared with, a wider one a higher bar.
func TestDownloadRunsConcReadsAtOnce(t *testing.T) {
	const conc = 4
	keys := make([]string, 3*conc)
	for i := range keys {
		keys[i] = fmt.Sprint(i)
	}
	var inFlight, peak atomic.Int32
	reached := make(chan struct{})
	var once sync.Once
	get := func(ctx context.Context, _ string) ([]byte, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == conc {
			once.Do(func() { close(reached) })
		}
		// Hold the read until conc are in flight (a hang guard, not a
		// timing assertion: a serial loop fails here after the guard).
		select {
		case <-reached:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("fewer than conc reads ever ran at once")
		}
		return []byte("x"), nil
	}
	if _, err := Download(context.Background(), get, keys, t.TempDir(), conc); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != conc {
		t.Fatalf("peak concurrency %d, want %d", p, conc)
	}
}

func TestDownloadFailsOnAFailedRead(t *testing.T) {
	boom := errors.New("boom")
	get := func(_ context.Context, key string) ([]byte, error) {
		if key == "b" {
			return nil, boom
		}
		return []byte("x"), nil
	}
	if _, err := Download(context.Background(), get, []string{"a", "b", "c"}, t.TempDir(), 2); !errors.Is(err, boom) {
		t.Fatalf("a failed read was not reported: %v", err)
	}
	if _, err := Download(context.Background(), get, nil, t.TempDir(), 0); err == nil {
		t.Fatal("concurrency 0 accepted")
	}
}

// idleLog opens a shard that ships to a counted memblob bucket, appends a
// few events and ships them.
func idleLog(t *testing.T, c *Counter) *bucketlog.Log {
	t.Helper()
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{
		Dir: t.TempDir(), Bucket: c.Wrap(memBucket(t)), NoBackground: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range 10 {
		if _, err := l.Append(context.Background(), localseg.Event{ExecutionID: "e", TransactionID: fmt.Sprint(i), Payload: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func shipTick(l *bucketlog.Log) TickFunc {
	return func(ctx context.Context) error {
		_, err := l.Ship(ctx, false)
		return err
	}
}

// A settled shard makes no request over 100 ticks; the RED control: a
// shard that gets one event per tick is seen talking on every tick, so a
// zero from Idle is not a counter that sees nothing.
func TestIdleCountsNothingOnlyWhenNothingHappens(t *testing.T) {
	ctx := context.Background()
	var c Counter
	l := idleLog(t, &c)
	if _, err := Settle(ctx, &c, shipTick(l), 3, 50); err != nil {
		t.Fatal(err)
	}
	quiet, err := Idle(ctx, &c, shipTick(l), 100)
	if err != nil {
		t.Fatal(err)
	}
	if quiet.Requests != 0 {
		t.Fatalf("a settled shard made requests over 100 ticks: %s", quiet)
	}

	n := 0
	busy := func(ctx context.Context) error {
		n++
		if _, err := l.Append(ctx, localseg.Event{ExecutionID: "e", TransactionID: fmt.Sprint("busy", n), Payload: "p"}); err != nil {
			return err
		}
		return shipTick(l)(ctx)
	}
	got, err := Idle(ctx, &c, busy, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got.Writes(blobtier.KindTail) != 5 {
		t.Fatalf("RED control: 5 ticks with a new event each counted %s, want 5 tail puts", got)
	}
}

// Settle refuses a shard that never stops talking instead of measuring it
// mid-flight.
func TestSettleRefusesABusyShard(t *testing.T) {
	var c Counter
	b := c.Wrap(memBucket(t))
	chatty := func(ctx context.Context) error {
		_, err := b.Stat(ctx, blobtier.CursorKey(0))
		if errors.Is(err, blobtier.ErrNotFound) {
			err = nil
		}
		return err
	}
	if _, err := Settle(context.Background(), &c, chatty, 3, 20); !errors.Is(err, ErrNeverQuiet) {
		t.Fatalf("a shard that requests on every tick settled: %v", err)
	}
}

func TestPerHour(t *testing.T) {
	if got := PerHour(2, 100, 15*time.Second); got != 4.8 {
		t.Fatalf("2 requests per 100 ticks of 15 s = %v/h, want 4.8", got)
	}
	if got := PerHour(0, 100, 15*time.Second); got != 0 {
		t.Fatalf("%v", got)
	}
}
