package bucketlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gocloud's and the emulators' HTTP clients keep idle connections.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func memBucket(t *testing.T) blobtier.Bucket {
	t.Helper()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	t.Cleanup(func() { b.Close() })
	return b
}

func ev(exec string, i int) localseg.Event {
	return localseg.Event{ExecutionID: exec, TransactionID: fmt.Sprintf("txn-%s-%d", exec, i), Payload: fmt.Sprintf(`{"n":%d,"s":"<a&b> é"}`, i)}
}

func mustOpen(t *testing.T, opts Options) *Log {
	t.Helper()
	l, err := Open(ctxT(t), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func scanAll(t *testing.T, l *Log) []localseg.Record {
	t.Helper()
	p, err := l.Scan(t.Context(), 0, 1_000_000)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return p.Records
}

func TestZeroOptionsLocalLog(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	l := mustOpen(t, Options{})
	ctx := ctxT(t)
	for i := 1; i <= 10; i++ {
		res, err := l.Append(ctx, ev("100", i))
		if err != nil {
			t.Fatal(err)
		}
		if res.Seq != uint64(i) || res.Created != (i == 1) {
			t.Fatalf("append %d: %+v", i, res)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, DefaultDir, "shard-0000")); err != nil {
		t.Fatalf("default dir: %v", err)
	}
	l = mustOpen(t, Options{})
	defer l.Close()
	if got := len(scanAll(t, l)); got != 10 {
		t.Fatalf("after reopen: %d records", got)
	}
}

func TestInvalidShardPairRefused(t *testing.T) {
	for _, o := range []Options{{ShardIndex: 2, ShardCount: 2}, {ShardIndex: 1}, {ShardIndex: -1, ShardCount: 2}} {
		o.Dir = t.TempDir()
		if _, err := Open(ctxT(t), o); !errors.Is(err, ErrUsage) {
			t.Fatalf("%+v: %v, want usage", o, err)
		}
	}
}

func TestShipRestoreRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, SegmentMaxBytes: 4096, NoBackground: true})
	var want []localseg.Event
	for i := 1; i <= 500; i++ {
		e := ev(fmt.Sprint(100+i%7), i)
		want = append(want, e)
		if _, err := l.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Pull(ctx, "c1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ack(ctx, "c1", 50); err != nil {
		t.Fatal(err)
	}
	rep, err := l.Ship(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Upload.Uploaded < 10 || rep.ShippedThrough != 500 {
		t.Fatalf("ship: %+v", rep)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	dst := t.TempDir()
	rr, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if rr.LastSeq != 500 {
		t.Fatalf("restore report: %+v", rr)
	}
	r := mustOpen(t, Options{Dir: dst, Bucket: b, SegmentMaxBytes: 4096, NoBackground: true})
	defer r.Close()
	got := scanAll(t, r)
	if len(got) != len(want) {
		t.Fatalf("restored %d of %d", len(got), len(want))
	}
	for i, rec := range got {
		w := want[i]
		if rec.Seq != uint64(i+1) || rec.ExecutionID != w.ExecutionID || rec.TransactionID != w.TransactionID || rec.Payload != w.Payload {
			t.Fatalf("record %d: %+v want %+v", i, rec, w)
		}
	}
	pr, err := r.Pull(ctx, "c1", 1)
	if err != nil || pr.Acked != 50 {
		t.Fatalf("restored consumer: %+v %v", pr, err)
	}
	// The restored store continues the sequence.
	res, err := r.Append(ctx, ev("100", 501))
	if err != nil || res.Seq != 501 {
		t.Fatalf("continue: %+v %v", res, err)
	}
}

func TestTailShipsUnsealedEvents(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	for i := 1; i <= 20; i++ {
		if _, err := l.Append(ctx, ev("7", i)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := l.Ship(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Upload.Uploaded != 0 || rep.TailBatches != 1 || rep.ShippedThrough != 20 {
		t.Fatalf("ship: %+v", rep)
	}
	// A second pass with nothing new writes nothing.
	rep, err = l.Ship(ctx, false)
	if err != nil || rep.TailBatches != 0 {
		t.Fatalf("idle ship: %+v %v", rep, err)
	}
	l.Close()
	dst := t.TempDir()
	if _, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst}); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, Options{Dir: dst, ReadOnly: true})
	defer r.Close()
	if got := len(scanAll(t, r)); got != 20 {
		t.Fatalf("restored %d of 20", got)
	}
}

func TestBackgroundTickShipsAndCloseShipsLast(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, TailInterval: time.Hour})
	for i := 1; i <= 5; i++ {
		if _, err := l.Append(ctx, ev("9", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The tick is an hour away: only Close's last shipment can ship them.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	rr, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: dst})
	if err != nil {
		t.Fatal(err)
	}
	if rr.LastSeq != 5 {
		t.Fatalf("restore after close: %+v", rr)
	}
}

func TestSyncToBucket(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, SyncToBucket: true, TailInterval: time.Hour})
	defer l.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				if _, err := l.Append(ctx, ev(fmt.Sprint(w), i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every acknowledged append is in the bucket: the tail objects cover 1..64.
	var covered uint64
	for info, err := range b.List(ctx, 0, blobtier.KindTail) {
		if err != nil {
			t.Fatal(err)
		}
		covered = max(covered, info.Parsed.LastSeq)
	}
	if covered != 64 {
		t.Fatalf("bucket covers through %d, want 64", covered)
	}
}

func TestStaleDiskRefused(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	for i := 1; i <= 3; i++ {
		l.Append(ctx, ev("1", i))
	}
	l.Close()
	// Keep a copy of the disk as it is now (a stale backup).
	stale := t.TempDir()
	copyDir(t, filepath.Join(dir, "shard-0000"), filepath.Join(stale, "shard-0000"))
	l = mustOpen(t, Options{Dir: dir, Bucket: b, NoBackground: true})
	for i := 4; i <= 6; i++ {
		l.Append(ctx, ev("1", i))
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	_, err := Open(ctx, Options{Dir: stale, Bucket: b, NoBackground: true})
	if !errors.Is(err, ErrStaleDisk) || Class(err) != ClassInvalidState {
		t.Fatalf("stale open: %v", err)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" {
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

func TestSyncToBucketWithoutBackground(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, SyncToBucket: true, NoBackground: true})
	defer l.Close()
	res, err := l.Append(ctx, ev("1", 1))
	if err != nil {
		t.Fatalf("sync append without background work: %v", err)
	}
	if l.ShippedThrough() < res.Seq {
		t.Fatalf("shipped %d < %d", l.ShippedThrough(), res.Seq)
	}
}

func TestPeriodicGCWithoutBucket(t *testing.T) {
	ctx := ctxT(t)
	l := mustOpen(t, Options{Dir: t.TempDir(), SegmentMaxBytes: 1024,
		GC: GCOptions{Enabled: true, Interval: 20 * time.Millisecond, MaxRetainedSegments: 3}})
	defer l.Close()
	for i := 1; i <= 300; i++ {
		if _, err := l.Append(ctx, ev("4", i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		snap, err := l.Store().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Segments) <= 3 && snap.ReclaimedSeq > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("periodic GC never bounded the store: %d segments, base %d", len(snap.Segments), snap.ReclaimedSeq)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
