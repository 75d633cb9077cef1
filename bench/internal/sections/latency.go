package sections

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/blobtier"
)

func init() {
	harness.Register(harness.Section{
		Name:  "latency",
		Doc:   "the bucket at a real round trip (20 ms injected before every HTTP request to gofakes3): one PUT and HEAD, sync appends p50/p99 at 1 and 64 appenders, restore, the tick",
		Order: 43,
		Run:   runLatency,
	})
}

// latencyDelay is the injected wait before every HTTP request: S3
// in-region.
const latencyDelay = 20 * time.Millisecond

const (
	latencyProbes       = 20
	latencyTicks        = 10
	latencyRestoreBytes = 32 << 20
)

func percentile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q * float64(len(s)))
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func runLatency(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "latency"
	emu, err := buckets.StartS3()
	if err != nil {
		return []harness.Row{harness.Failed(section, "gofakes3", "", err)}, nil
	}
	defer emu.Close()
	var rows []harness.Row
	put, head, rtRows := roundTripRows(ctx, emu)
	rows = append(rows, rtRows...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows = append(rows, latencySyncRows(ctx, env, emu, put, head)...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows = append(rows, latencyRestoreRows(ctx, env, emu)...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows = append(rows, latencyTickRows(ctx, env, emu)...)
	return rows, nil
}

// roundTripRows measures one PUT of a tail-sized object and one HEAD
// through the delayed client, sequentially: the unit the sync targets are
// stated in.
func roundTripRows(ctx context.Context, emu *buckets.Emulator) (put, head harness.Row, rows []harness.Row) {
	const section = "latency"
	put = harness.Row{Section: section, Name: "one PUT round trip (4 KiB)", Metric: "ms per PUT", Unit: "ms"}
	head = harness.Row{Section: section, Name: "one HEAD round trip", Metric: "ms per HEAD", Unit: "ms"}
	fail := func(err error) (harness.Row, harness.Row, []harness.Row) {
		put = harness.Failed(section, put.Name, "ms", err)
		head = harness.Failed(section, head.Name, "ms", err)
		return put, head, []harness.Row{put, head}
	}
	name, err := emu.NewBucket("rtt")
	if err != nil {
		return fail(err)
	}
	b, _, err := emu.OpenDelayed(ctx, name, latencyDelay)
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	data := make([]byte, 4096)
	var puts, heads []float64
	for i := range latencyProbes + 1 {
		key := blobtier.TailKey(0, uint64(i)*10+1, uint64(i)*10+10)
		t0 := time.Now()
		if err := b.Put(ctx, key, data); err != nil {
			return fail(err)
		}
		t1 := time.Now()
		if _, err := b.Stat(ctx, key); err != nil {
			return fail(err)
		}
		if i == 0 {
			continue // the connection's setup
		}
		puts = append(puts, ms(t1.Sub(t0)))
		heads = append(heads, ms(time.Since(t1)))
	}
	put = harness.Measured(section, put.Name, put.Metric, "ms", puts, fmt.Sprintf("%v injected + gofakes3; median of %d sequential puts", latencyDelay, latencyProbes))
	head = harness.Measured(section, head.Name, head.Metric, "ms", heads, fmt.Sprintf("median of %d; fencing sends one per group", latencyProbes))
	return put, head, []harness.Row{put, head}
}

type latSyncRep struct {
	perSec, p50, p99, perPut float64
}

// latencySyncOnce drives a fresh synchronous shard over the delayed client
// with writers closed-loop appenders for d, timing every append.
// unfenced shows the bucket as one without compare-and-swap, so the shard
// runs unfenced (epoch 0, no HEAD per group): what fencing adds.
func latencySyncOnce(ctx context.Context, env *harness.Env, emu *buckets.Emulator, writers int, d time.Duration, unfenced bool) (latSyncRep, error) {
	var c buckets.Counter
	var wrap []func(blobtier.Bucket) blobtier.Bucket
	if unfenced {
		wrap = append(wrap, func(b blobtier.Bucket) blobtier.Bucket { return noFenceBucket{b} })
	}
	l, _, done, err := costLog(ctx, env, emu, &c, latencyDelay, bucketlog.Options{SyncToBucket: true}, wrap...)
	if err != nil {
		return latSyncRep{}, err
	}
	defer done()
	src := newEventSource(BucketPayload, env.Executions)
	var srcMu sync.Mutex
	if _, err := l.Append(ctx, src.event()); err != nil {
		return latSyncRep{}, err
	}
	before := c.Snapshot()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		lats   []time.Duration
		failed atomic.Value
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				srcMu.Lock()
				ev := src.event()
				srcMu.Unlock()
				t0 := time.Now()
				if _, err := l.Append(ctx, ev); err != nil {
					failed.Store(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		return latSyncRep{}, err
	}
	tails := c.Snapshot().Sub(before).Writes(blobtier.KindTail)
	if tails == 0 || len(lats) == 0 {
		return latSyncRep{}, fmt.Errorf("%d appends, %d tail puts", len(lats), tails)
	}
	return latSyncRep{perSec: float64(len(lats)) / elapsed.Seconds(), p50: ms(percentile(lats, 0.5)), p99: ms(percentile(lats, 0.99)),
		perPut: float64(len(lats)) / float64(tails)}, nil
}

func latencySyncRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator, put, head harness.Row) []harness.Row {
	const section = "latency"
	d := 3 * time.Second
	if env.Quick {
		d = 1500 * time.Millisecond
	}
	writers := []int{1, 64}
	type cell struct {
		rate, p50, p99, perPut []float64
		err                    error
	}
	cells := map[int]*cell{1: {}, 64: {}, 0: {}} // 0: one appender, unfenced
	for rep := 0; rep < env.Reps; rep++ {
		for _, w := range append(writers, 0) {
			c := cells[w]
			if c.err != nil || ctx.Err() != nil {
				continue
			}
			r, err := latencySyncOnce(ctx, env, emu, max(w, 1), d, w == 0)
			if err != nil {
				c.err = err
				continue
			}
			c.rate, c.p50, c.p99, c.perPut = append(c.rate, r.perSec), append(c.p50, r.p50), append(c.p99, r.p99), append(c.perPut, r.perPut)
			env.Logf("latency: sync rep %d w=%d: %.0f appends/s, p50 %.1f ms, p99 %.1f ms, %.1f appends/put", rep+1, w, r.perSec, r.p50, r.p99, r.perPut)
		}
	}
	var rows []harness.Row
	rate := map[int]harness.Row{}
	p50 := map[int]harness.Row{}
	for _, w := range writers {
		c := cells[w]
		name := fmt.Sprintf("sync, %d B, w=%d, %v per request", BucketPayload, w, latencyDelay)
		if c.err != nil {
			rows = append(rows, harness.Failed(section, name+"/appends/s", "appends/s", c.err))
			rate[w], p50[w] = rows[len(rows)-1], rows[len(rows)-1]
			continue
		}
		rate[w] = harness.Measured(section, name+"/appends/s", "appends/s", "appends/s", c.rate,
			fmt.Sprintf("closed loop, %v per repetition; appends per tail put (median) %.1f", d, harness.Median(c.perPut)))
		p50[w] = harness.Measured(section, name+"/p50", "append latency p50", "ms", c.p50, "")
		rows = append(rows, rate[w], p50[w], harness.Measured(section, name+"/p99", "append latency p99", "ms", c.p99, ""),
			harness.Measured(section, name+"/appends per tail put", "appends per tail put", "appends/put", c.perPut, ""))
	}
	unf := harness.Measured(section, fmt.Sprintf("sync, %d B, w=1, %v per request, unfenced/p50", BucketPayload, latencyDelay), "append latency p50", "ms", cells[0].p50,
		"the same bucket shown without compare-and-swap: epoch 0, no fence HEAD")
	if c := cells[0]; c.err != nil {
		unf = harness.Failed(section, unf.Name, "ms", c.err)
	}
	rows = append(rows, unf,
		harness.Ratio(section+"/ratio", "sync p50 w=1 fenced / unfenced", p50[1], unf, "what fencing adds: its HEAD goes out beside the read-back"),
		harness.Ratio(section+"/ratio", "sync p50 w=1 / one PUT round trip", p50[1], put,
			"TARGET ≤ 2.2; gofakes3 can compare-and-swap, so fencing is on: the p50 includes its HEAD"),
		harness.Ratio(section+"/ratio", "sync appends/s w=64 / w=1", rate[64], rate[1], "TARGET ≥ 40"))
	return rows
}

// latencyRestoreRows restores one bucket (built over the undelayed
// client) with and without the delay, interleaved.
func latencyRestoreRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator) []harness.Row {
	const section = "latency"
	target := int64(latencyRestoreBytes)
	if env.Quick {
		target /= 2
	}
	nameD := fmt.Sprintf("%s/bucketlog.Restore, %v per request", mibLabel(target), latencyDelay)
	name0 := fmt.Sprintf("%s/bucketlog.Restore, no delay", mibLabel(target))
	fail := func(err error) []harness.Row {
		return []harness.Row{harness.Failed(section, nameD, "MiB/s", err), harness.Failed(section, name0, "MiB/s", err)}
	}
	name, err := emu.NewBucket("lrestore")
	if err != nil {
		return fail(err)
	}
	raw, err := emu.Open(ctx, name)
	if err != nil {
		return fail(err)
	}
	defer raw.Close()
	rb, err := buildRestoreBucket(ctx, env, raw, target)
	if err != nil {
		return fail(err)
	}
	delayed, tr, err := emu.OpenDelayed(ctx, name, latencyDelay)
	if err != nil {
		return fail(err)
	}
	defer delayed.Close()
	var withD, without []float64
	var reqs map[string]int64
	reps := min(env.Reps, 3)
	for rep := 0; rep < reps && ctx.Err() == nil; rep++ {
		for _, v := range []struct {
			b   blobtier.Bucket
			out *[]float64
		}{{delayed, &withD}, {raw, &without}} {
			dir, err := tempDir(env.WorkDir, "lrestore-")
			if err != nil {
				return fail(err)
			}
			h0 := tr.Methods()
			t0 := time.Now()
			r, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: v.b, Shard: 0, Dir: dir, Concurrency: restoreConcurrency})
			el := time.Since(t0)
			os.RemoveAll(dir)
			if err != nil {
				return fail(err)
			}
			if r.LastSeq != rb.tip {
				return fail(fmt.Errorf("restored through %d, the bucket holds through %d", r.LastSeq, rb.tip))
			}
			*v.out = append(*v.out, float64(rb.bytes)/(1<<20)/el.Seconds())
			if v.b == delayed {
				reqs = subMethods(tr.Methods(), h0)
			}
		}
	}
	var n int64
	for _, k := range reqs {
		n += k
	}
	dRow := harness.Measured(section, nameD, "restored MiB/s", "MiB/s", withD, fmt.Sprintf(
		"%d segment objects of %s, concurrency %d; %d HTTP requests (%v); their %v waits sum to %.1f s (most overlap)",
		len(rb.keys), mibLabel(restoreSegmentBytes), restoreConcurrency, n, reqs, latencyDelay, float64(n)*latencyDelay.Seconds()))
	zRow := harness.Measured(section, name0, "restored MiB/s", "MiB/s", without, "the same bucket, the undelayed client, interleaved")
	return []harness.Row{dRow, zRow, harness.Ratio(section+"/ratio", "restore at 20 ms / no delay", dRow, zRow, "what the round trip costs restore")}
}

// latencyTickRows times Log.Ship of an async shard (NoBackground) after
// 100 new events, over the delayed client: what one tick takes and how
// many HTTP requests it makes.
func latencyTickRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator) []harness.Row {
	const section = "latency"
	name := fmt.Sprintf("async tick after 100 appends, %v per request", latencyDelay)
	nameIdle := fmt.Sprintf("async tick with nothing new, %v per request", latencyDelay)
	var c buckets.Counter
	l, tr, done, err := costLog(ctx, env, emu, &c, latencyDelay, bucketlog.Options{NoBackground: true})
	if err != nil {
		return []harness.Row{harness.Failed(section, name, "ms", err)}
	}
	defer done()
	src := newEventSource(BucketPayload, env.Executions)
	var busy, idle, reqs []float64
	for i := range latencyTicks + 1 {
		if err := appendEvents(ctx, l, src, 100); err != nil {
			return []harness.Row{harness.Failed(section, name, "ms", err)}
		}
		h0 := tr.Methods()
		t0 := time.Now()
		if _, err := l.Ship(ctx, false); err != nil {
			return []harness.Row{harness.Failed(section, name, "ms", err)}
		}
		el := time.Since(t0)
		var n int64
		for _, k := range subMethods(tr.Methods(), h0) {
			n += k
		}
		t1 := time.Now()
		if _, err := l.Ship(ctx, false); err != nil {
			return []harness.Row{harness.Failed(section, name, "ms", err)}
		}
		if i == 0 {
			continue // the first cursor object
		}
		busy, idle, reqs = append(busy, ms(el)), append(idle, ms(time.Since(t1))), append(reqs, float64(n))
	}
	return []harness.Row{
		harness.Measured(section, name, "Log.Ship wall time", "ms", busy, fmt.Sprintf(
			"median of %d ticks; HTTP requests per tick median %.0f (max %.0f): at %v each, %.1f round trips in sequence",
			latencyTicks, harness.Median(reqs), slices.Max(reqs), latencyDelay, harness.Median(busy)/ms(latencyDelay))),
		harness.Measured(section, nameIdle, "Log.Ship wall time", "ms", idle, "the tick right after: nothing to ship, no request expected"),
	}
}

// noFenceBucket is a bucket that claims no compare-and-swap: a shard on it
// runs unfenced.
type noFenceBucket struct{ blobtier.Bucket }

func (noFenceBucket) CanCAS() bool { return false }
