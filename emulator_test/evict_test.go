package emulator_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
)

// Local retention (issue 16) on the S3 emulator: a 256 KiB budget, 16 KiB
// segments, a few MiB appended, no consumers.
const (
	evictBudget = 256 << 10
	evictSegMax = 16 << 10
)

// diskSegmentBytes is what the shard's segment files take on disk (the
// active one preallocated to the segment cap).
func diskSegmentBytes(t *testing.T, dir string) int64 {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ".eslog") {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += info.Size()
		}
	}
	return n
}

func evictEvent(execs []string, i int) localseg.Event {
	e := event(execs, i)
	e.Payload += " " + strings.Repeat(fmt.Sprint(i%10), 600+i%300)
	return e
}

// readAllBack checks every event through a paged scan, every execution's
// reads, a consumer's pulls and the stream, byte for byte.
func readAllBack(t *testing.T, l *bucketlog.Log, execs []string, want []localseg.Record) {
	t.Helper()
	ctx := ctxT(t)
	var got []localseg.Record
	for after := uint64(0); ; {
		p, err := l.Scan(ctx, after, 700)
		if err != nil {
			t.Fatalf("scan after %d: %v", after, err)
		}
		if len(p.Records) == 0 {
			break
		}
		got = append(got, p.Records...)
		after = p.Records[len(p.Records)-1].Seq
	}
	sameRecords(t, "scan", got, want)
	for _, x := range execs {
		res, err := l.ReadExecution(ctx, x, 0, len(want))
		if err != nil {
			t.Fatalf("read execution %s: %v", x, err)
		}
		var w []localseg.Record
		for _, r := range want {
			if r.ExecutionID == x {
				w = append(w, r)
			}
		}
		sameRecords(t, "execution "+x, res.Page.Records, w)
	}
	got = got[:0]
	for {
		p, err := l.Pull(ctx, "evict-reader", 500)
		if err != nil {
			t.Fatalf("pull: %v", err)
		}
		if len(p.Records) == 0 {
			break
		}
		got = append(got, p.Records...)
		if _, err := l.Ack(ctx, "evict-reader", p.Records[len(p.Records)-1].Seq); err != nil {
			t.Fatal(err)
		}
	}
	sameRecords(t, "pulls", got, want)
	if err := l.DeleteConsumer(ctx, "evict-reader"); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for r, err := range l.Follow(ctx, 0) {
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		got = append(got, r)
		if r.Seq == want[len(want)-1].Seq {
			break
		}
	}
	sameRecords(t, "stream", got, want)
}

// TestEvictLongRun: while the bucket is healthy the shard's segment files
// never take more than the budget + one segment + the active segment;
// every event reads back byte for byte through every read path, also after
// a restart; a bucket failure during a remote read is a storage error
// (503), not corruption; GC reclaims an evicted range.
func TestEvictLongRun(t *testing.T) {
	v := newEnv(t, backends[0], true)
	root := t.TempDir()
	opts := bucketlog.Options{Dir: root, Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true,
		LocalRetentionBytes: evictBudget, RemoteCacheBytes: 64 << 10}
	l := open(t, opts)
	first := segN(t, l, 1) // the writer's first segment id (a fencing bucket's writer starts at its cut's start_segment)
	dir := l.Dir()
	execs := execsOf(0, 1, 9)
	var want []localseg.Record
	ctx := ctxT(t)
	var peak int64
	const total = 3 << 20
	for i, size := 0, 0; size < total; {
		// About one segment, then a pass (uploads, then eviction).
		for chunk := 0; chunk < evictSegMax; i++ {
			e := evictEvent(execs, i)
			res, err := l.Append(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
			chunk += len(e.Payload) + 100
			size += len(e.Payload) + 100
		}
		if _, err := l.Ship(ctx, false); err != nil {
			t.Fatal(err)
		}
		used := diskSegmentBytes(t, dir)
		peak = max(peak, used)
		if used > evictBudget+2*evictSegMax {
			t.Fatalf("after %d bytes appended the segment files take %d bytes, above the budget %d + one segment + the active one", size, used, evictBudget)
		}
	}
	st := l.Store().RemoteStats()
	if st.Evicted == 0 || st.LocalSealed > evictBudget {
		t.Fatalf("after the run: %+v", st)
	}
	figures(t, time.Now(), "%d events, %d segments evicted (%d bytes), peak segment files %d bytes (budget %d)", len(want), st.Evicted, st.EvictedBytes, peak, evictBudget)
	readAllBack(t, l, execs, want)
	closeLog(t, l)

	// A restart keeps the evicted state, and reads work again.
	l = open(t, opts)
	if got := l.Store().RemoteStats(); got.Evicted != st.Evicted {
		t.Fatalf("after a restart %d segments are evicted, before %d", got.Evicted, st.Evicted)
	}
	readAllBack(t, l, execs, want)

	// A bucket failure during a read of an evicted segment that is not
	// cached: a storage error (503), never corruption, never a short page.
	rule := v.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: blobtier.SegmentKey(0, first)})
	for _, read := range []func() error{
		func() error { _, err := l.Scan(ctx, 0, 10); return err },
		func() error { _, err := l.ReadExecution(ctx, execs[0], 0, 10); return err },
		func() error { _, err := l.Pull(ctx, "late", 10); return err },
	} {
		err := read()
		if err == nil || bucketlog.HTTPStatus(err) != 503 || errors.Is(err, localseg.ErrCorrupt) || !errors.Is(err, localseg.ErrRemoteRead) {
			t.Fatalf("a read with the bucket failing: %v (status %d), want a storage error that is not corruption", err, bucketlog.HTTPStatus(err))
		}
	}
	v.fb.Remove(rule)
	// The failed first pull created no consumer.
	if err := l.DeleteConsumer(ctx, "late"); !errors.Is(err, bucketlog.ErrUnknownConsumer) {
		t.Fatalf("the consumer of a pull that answered 503: delete answered %v, want unknown consumer", err)
	}
	readAllBack(t, l, execs, want)

	// GC of an evicted range: keep the last 100 segments.
	rep, err := l.GC(ctx, bucketlog.GCRequest{MaxRetainedSegments: 100})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Local.ThroughSegment == 0 || !l.Store().IsEvicted(rep.Local.ThroughSegment+1) {
		t.Fatalf("GC reclaimed through segment %d: want a boundary inside the evicted range", rep.Local.ThroughSegment)
	}
	base := rep.Local.ThroughSeq
	if _, err := l.Store().Get(base); !errors.Is(err, localseg.ErrReclaimed) {
		t.Fatalf("get of a reclaimed evicted event: %v", err)
	}
	want = want[base:]
	if objs := objects(t, v.b, 0, blobtier.KindSegment); len(objs) == 0 || objs[0].Parsed.Segment <= rep.Local.ThroughSegment {
		t.Fatalf("segment objects after GC start at %v", objs)
	}
	readAllBack(t, l, execs, want)
	closeLog(t, l)
	l = open(t, opts)
	readAllBack(t, l, execs, want)
	if st := l.Store().RemoteStats(); st.Evicted == 0 || !l.Store().IsEvicted(rep.Local.ThroughSegment+1) {
		t.Fatalf("after GC and a restart: %+v", st)
	}
}

// TestEvictKeepsUndurable: while segment uploads fail, nothing they should
// have made durable leaves the disk (the budget becomes a target and the
// overshoot shows); once the bucket answers, the pass evicts them.
func TestEvictKeepsUndurable(t *testing.T) {
	v := newEnv(t, backends[0], true)
	opts := bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true,
		LocalRetentionBytes: 4 * evictSegMax, DisableTailReplication: true}
	l := open(t, opts)
	execs := execsOf(0, 1, 3)
	ctx := ctxT(t)
	rule := v.fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Key: "*seg*"})
	var want []localseg.Record
	for i := range 400 {
		e := evictEvent(execs, i)
		res, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
	}
	if _, err := l.Ship(ctx, false); err == nil {
		t.Fatal("ship succeeded with every segment upload refused")
	}
	st := l.Store().RemoteStats()
	if st.Evicted != 0 || st.LocalSealed <= 4*evictSegMax {
		t.Fatalf("with the uploads failing: %+v, want nothing evicted and the budget overshot", st)
	}
	v.fb.Remove(rule)
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if st := l.Store().RemoteStats(); st.Evicted == 0 || st.LocalSealed > 4*evictSegMax {
		t.Fatalf("after the bucket recovered: %+v", st)
	}
	readAllBack(t, l, execs, want)
}

// TestEvictedObjectMissingRefusesStart: the owner does not start over an
// evicted segment the bucket no longer holds (its events exist nowhere
// else); with the object back, it starts and reads everything.
func TestEvictedObjectMissingRefusesStart(t *testing.T) {
	v := newEnv(t, backends[0], true)
	opts := bucketlog.Options{Dir: t.TempDir(), Bucket: v.b, SegmentMaxBytes: evictSegMax, NoBackground: true,
		LocalRetentionBytes: 2 * evictSegMax}
	l := open(t, opts)
	second := segN(t, l, 2)
	execs := execsOf(0, 1, 3)
	ctx := ctxT(t)
	want := make([]localseg.Record, 0, 300)
	for i := range 300 {
		e := evictEvent(execs, i)
		res, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, localseg.Record{Seq: res.Seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if !l.Store().IsEvicted(second) {
		t.Fatalf("segment %d not evicted: %+v", second, l.Store().RemoteStats())
	}
	closeLog(t, l)
	key := blobtier.SegmentKey(0, second)
	data, meta, err := v.b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	opts.Logger = quietLogger(t)
	opts.StartupTimeout = 300 * time.Millisecond // a missing object is retried like a failing bucket
	if l, err := bucketlog.Open(ctx, opts); err == nil {
		l.Close()
		t.Fatal("the owner started over an evicted segment the bucket lacks")
	} else if !strings.Contains(err.Error(), "evicted") {
		t.Fatalf("open: %v", err)
	}
	if err := v.b.PutIfAbsent(ctx, key, data, meta.Epoch); err != nil {
		t.Fatal(err)
	}
	l = open(t, opts)
	readAllBack(t, l, execs, want)
}
