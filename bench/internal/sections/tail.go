package sections

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	harness.Register(harness.Section{
		Name:    "tail",
		Doc:     "tail shipping against in-process gofakes3: bytes put per byte appended, tail puts and cursor writes per tick, requests of an idle shard, synchronous-mode appends/s at 1 and 64 appenders",
		Default: true,
		Order:   41,
		Run:     runTail,
	})
}

// Tail section sizes.
const (
	// tailSegmentBytes makes the amplification run seal a segment every few
	// ticks.
	tailSegmentBytes   = 1 << 20
	tailFullBytes      = 8 << 20
	tailQuickBytes     = 4 << 20
	idleTicks          = 100
	idleBackgroundTick = 10 * time.Millisecond
)

// tailTickEvents are the appends between two ticks of the amplification
// run.
var tailTickEvents = []int{100, 1000}

func runTail(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "tail"
	emu, err := buckets.StartS3()
	if err != nil {
		return []harness.Row{harness.Failed(section, "gofakes3", "", err)}, nil
	}
	defer emu.Close()
	total := int64(tailFullBytes)
	if env.Quick {
		total = tailQuickBytes
	}
	var rows []harness.Row
	for _, n := range tailTickEvents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows = append(rows, amplificationRows(ctx, env, emu, n, total)...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows = append(rows, idleShipRows(ctx, env, emu)...)
	rows = append(rows, idleBackgroundRows(ctx, env, emu)...)
	rows = append(rows, syncRows(ctx, env, emu)...)
	return rows, nil
}

// countedLog opens a shard under a fresh directory that ships to a fresh
// bucket of emu, counted by c. The caller closes the log, then the bucket,
// and removes the directory.
func countedLog(ctx context.Context, env *harness.Env, emu *buckets.Emulator, c *buckets.Counter, opts bucketlog.Options) (*bucketlog.Log, blobtier.Bucket, string, error) {
	name, err := emu.NewBucket("tail")
	if err != nil {
		return nil, nil, "", err
	}
	b, err := emu.Open(ctx, name)
	if err != nil {
		return nil, nil, "", err
	}
	dir, err := tempDir(env.WorkDir, "tail-")
	if err != nil {
		b.Close()
		return nil, nil, "", err
	}
	opts.Dir, opts.Bucket = dir, c.Wrap(b)
	if opts.Logger == nil {
		opts.Logger = warnLogger()
	}
	l, err := bucketlog.Open(ctx, opts)
	if err != nil {
		b.Close()
		os.RemoveAll(dir)
		return nil, nil, "", err
	}
	return l, b, dir, nil
}

// ampResult is one amplification run.
type ampResult struct {
	appended   int64            // frame bytes in the local segments at the end
	counts     buckets.Counts   // every request of the run (not the open)
	perTick    []buckets.Counts // each tick's requests
	ticks      int
	segments   int    // segments the engine reported uploaded
	engineTail uint64 // tail objects the engine reported committed
}

// amplificationRun appends tickEvents events between ticks (Log.Ship
// without sealing) until the local segments hold total bytes, then ships
// once more with sealActive, so every appended byte has gone up in a
// segment as well as (unless a seal beat the tick) in a tail object.
func amplificationRun(ctx context.Context, env *harness.Env, emu *buckets.Emulator, tickEvents int, total int64) (ampResult, error) {
	var r ampResult
	var c buckets.Counter
	l, b, dir, err := countedLog(ctx, env, emu, &c, bucketlog.Options{SegmentMaxBytes: tailSegmentBytes, NoBackground: true})
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	defer b.Close()
	defer l.Close()
	start := c.Snapshot()
	src := newEventSource(BucketPayload, env.Executions)
	tick := func(seal bool) error {
		before := c.Snapshot()
		rep, err := l.Ship(ctx, seal)
		if err != nil {
			return fmt.Errorf("tick %d: %w", r.ticks+1, err)
		}
		r.ticks++
		r.perTick = append(r.perTick, c.Snapshot().Sub(before))
		r.segments += rep.Upload.Uploaded
		r.engineTail += rep.TailBatches
		return nil
	}
	for {
		n, _, err := localBytes(l)
		if err != nil {
			return r, err
		}
		if n >= total {
			break
		}
		if err := appendEvents(ctx, l, src, tickEvents); err != nil {
			return r, err
		}
		if err := tick(false); err != nil {
			return r, err
		}
	}
	if err := tick(true); err != nil {
		return r, err
	}
	r.counts = c.Snapshot().Sub(start)
	if r.appended, _, err = localBytes(l); err != nil {
		return r, err
	}
	if st := l.ShippedThrough(); st != l.Store().Tip() {
		return r, fmt.Errorf("the bucket holds through %d of %d after the last tick", st, l.Store().Tip())
	}
	// The counter and the engine must agree on what was put, or one of them
	// is not counting what the row says.
	if got := r.counts.Writes(blobtier.KindTail); uint64(got) != r.engineTail {
		return r, fmt.Errorf("the counter saw %d tail puts, the engine reports %d", got, r.engineTail)
	}
	if got := r.counts.Writes(blobtier.KindSegment); got != int64(r.segments) {
		return r, fmt.Errorf("the counter saw %d segment puts, the engine reports %d uploads", got, r.segments)
	}
	if r.counts.Errors > 0 {
		return r, fmt.Errorf("%d requests failed", r.counts.Errors)
	}
	return r, nil
}

func amplificationRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator, tickEvents int, total int64) []harness.Row {
	const section = "tail"
	prefix := fmt.Sprintf("async, %s appended, Ship every %d appends", mibLabel(total), tickEvents)
	nameAmp := prefix + "/bytes put ÷ bytes appended"
	nameTail := prefix + "/tail puts per tick (max)"
	nameCur := prefix + "/cursor writes per tick (max)"
	nameOther := prefix + "/other requests per tick (mean)"
	t0 := time.Now()
	r, err := amplificationRun(ctx, env, emu, tickEvents, total)
	if err != nil {
		return []harness.Row{
			harness.Failed(section, nameAmp, "x", err),
			harness.Failed(section, nameTail, "puts/tick", err),
			harness.Failed(section, nameCur, "writes/tick", err),
			harness.Failed(section, nameOther, "requests/tick", err),
		}
	}
	env.Logf("tail: amplification run, tick every %d appends: %d ticks in %v", tickEvents, r.ticks, time.Since(t0).Round(time.Millisecond))
	wb := r.counts.UpByKind
	amp := float64(r.counts.Up) / float64(r.appended)
	var maxTail, maxCur, sumTail, sumCur, shipped int64
	var other []float64
	for _, d := range r.perTick {
		tl, cur := d.Writes(blobtier.KindTail), d.Writes(blobtier.KindCursor)
		maxTail, maxCur = max(maxTail, tl), max(maxCur, cur)
		sumTail += tl
		sumCur += cur
		if tl > 0 {
			shipped++
		}
		other = append(other, float64(d.Requests-tl-cur-d.Writes(blobtier.KindSegment)))
	}
	row := func(name, metric, unit string, v float64, note string) harness.Row {
		return harness.Row{Section: section, Name: name, Metric: metric, Unit: unit, Value: v, Note: note}
	}
	return []harness.Row{
		row(nameAmp, "bytes put / frame bytes appended", "x", amp, fmt.Sprintf(
			"TARGET ≤ 2.1; %s appended (frames of %d B payloads); put: segments %s in %d, tail %s in %d, cursor %.1f KiB in %d; %d ticks, %s segments",
			mibLabel(r.appended), BucketPayload, mibLabel(wb[blobtier.KindSegment]), r.counts.Writes(blobtier.KindSegment),
			mibLabel(wb[blobtier.KindTail]), r.counts.Writes(blobtier.KindTail), float64(wb[blobtier.KindCursor])/1024, r.counts.Writes(blobtier.KindCursor),
			r.ticks, mibLabel(tailSegmentBytes))),
		row(nameTail, "tail puts per shard per tick, worst tick", "puts/tick", float64(maxTail), fmt.Sprintf(
			"TARGET ≤ 1 (no tick ships 8 MiB here); mean %.2f over %d ticks; a tick that finds its events already in an uploaded segment puts none",
			float64(sumTail)/float64(r.ticks), r.ticks)),
		row(nameCur, "cursor object writes per tick, worst tick", "writes/tick", float64(maxCur), fmt.Sprintf(
			"TARGET 1 per tick that moved shipped_through; %d writes over %d ticks, %d of which put a tail object", sumCur, r.ticks, shipped)),
		row(nameOther, "requests per tick other than tail, cursor and segment writes", "requests/tick", mean(other),
			fmt.Sprintf("max %.0f; the whole run: %s", slices.Max(other), r.counts)),
	}
}

// fakeClock is the engine's Options.Now in the idle measurement: each tick
// moves it 15 s, so the 100 ticks span what they would in production
// (and the seal by age of the last segment comes due among them).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// idleShipRows measures an idle shard driven by explicit ticks: after its
// last events were shipped as a tail object (its active segment holds
// them, unsealed), 100 ticks of Ship with the clock moved by the default
// tick each time, then 100 more. The first window contains the seal by age
// (default 15 minutes) of the last segment and its upload; the second is
// the settled shard, which must make no request at all.
func idleShipRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator) []harness.Row {
	const section = "tail"
	interval := bucketlog.DefaultTailInterval
	name1 := fmt.Sprintf("idle shard, Ship + clock %v per tick/requests in ticks 1-%d", interval, idleTicks)
	name2 := fmt.Sprintf("idle shard, Ship + clock %v per tick/requests in ticks %d-%d", interval, idleTicks+1, 2*idleTicks)
	nameHour := fmt.Sprintf("idle shard/requests per hour at the default %v tick", interval)
	w1, w2, err := idleShip(ctx, env, emu, interval)
	if err != nil {
		return []harness.Row{
			harness.Failed(section, name1, "requests", err),
			harness.Failed(section, name2, "requests", err),
			harness.Failed(section, nameHour, "requests/h", err),
		}
	}
	row := func(name, metric, unit string, v float64, note string) harness.Row {
		return harness.Row{Section: section, Name: name, Metric: metric, Unit: unit, Value: v, Note: note}
	}
	return []harness.Row{
		row(name1, "requests over 100 ticks", "requests", float64(w1.Requests),
			fmt.Sprintf("%s; includes the seal by age (%v) of the last segment, its upload and the cleanup it allows", w1, bucketlog.DefaultSealMaxAge)),
		row(name2, "requests over 100 ticks", "requests", float64(w2.Requests), "TARGET 0; "+w2.String()),
		row(nameHour, "requests/hour, from the settled window", "requests/h", buckets.PerHour(w2.Requests, idleTicks, interval),
			fmt.Sprintf("TARGET 0; the first %v after the last append also pay the %d requests of the first window once", time.Duration(idleTicks)*interval, w1.Requests)),
	}
}

func idleShip(ctx context.Context, env *harness.Env, emu *buckets.Emulator, interval time.Duration) (w1, w2 buckets.Counts, err error) {
	var c buckets.Counter
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, b, dir, err := countedLog(ctx, env, emu, &c, bucketlog.Options{NoBackground: true, Now: clock.Now})
	if err != nil {
		return w1, w2, err
	}
	defer os.RemoveAll(dir)
	defer b.Close()
	defer l.Close()
	src := newEventSource(BucketPayload, env.Executions)
	if err := appendEvents(ctx, l, src, 1000); err != nil {
		return w1, w2, err
	}
	before := c.Snapshot()
	if _, err := l.Ship(ctx, false); err != nil {
		return w1, w2, err
	}
	if c.Snapshot().Sub(before).Writes(blobtier.KindTail) != 1 {
		return w1, w2, errors.New("the tick after the last append put no tail object")
	}
	tick := func(ctx context.Context) error {
		clock.Advance(interval)
		_, err := l.Ship(ctx, false)
		return err
	}
	if w1, err = buckets.Idle(ctx, &c, tick, idleTicks); err != nil {
		return w1, w2, err
	}
	if w2, err = buckets.Idle(ctx, &c, tick, idleTicks); err != nil {
		return w1, w2, err
	}
	// The control: one event, one tick. A counter that saw nothing here
	// would also see nothing in an idle shard that talks.
	if err := appendEvents(ctx, l, src, 1); err != nil {
		return w1, w2, err
	}
	ctl, err := buckets.Idle(ctx, &c, tick, 1)
	if err != nil {
		return w1, w2, err
	}
	if ctl.Writes(blobtier.KindTail) != 1 {
		return w1, w2, fmt.Errorf("control: a tick with one new event made %s, not one tail put", ctl)
	}
	return w1, w2, nil
}

// idleBackgroundRows measures the engine's own loops: TailInterval 10 ms,
// background work on, the shard settled after its last events (sealed and
// shipped), then 100 intervals of wall time.
func idleBackgroundRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator) []harness.Row {
	const section = "tail"
	name := fmt.Sprintf("idle shard, background ticker at %v/requests over %d ticks", idleBackgroundTick, idleTicks)
	w, settle, err := idleBackground(ctx, env, emu)
	if err != nil {
		return []harness.Row{harness.Failed(section, name, "requests", err)}
	}
	return []harness.Row{{Section: section, Name: name, Metric: "requests over 100 intervals of wall time", Unit: "requests",
		Value: float64(w.Requests), Note: fmt.Sprintf("TARGET 0; %s; settled after %d intervals; tick and maintenance loops running", w, settle)}}
}

func idleBackground(ctx context.Context, env *harness.Env, emu *buckets.Emulator) (buckets.Counts, int, error) {
	var c buckets.Counter
	l, b, dir, err := countedLog(ctx, env, emu, &c, bucketlog.Options{TailInterval: idleBackgroundTick})
	if err != nil {
		return buckets.Counts{}, 0, err
	}
	defer os.RemoveAll(dir)
	defer b.Close()
	defer l.Close()
	src := newEventSource(BucketPayload, env.Executions)
	if err := appendEvents(ctx, l, src, 1000); err != nil {
		return buckets.Counts{}, 0, err
	}
	tick := buckets.SleepTick(idleBackgroundTick)
	settle, err := buckets.Settle(ctx, &c, tick, 20, 1000)
	if err != nil {
		return buckets.Counts{}, settle, err
	}
	if st, tip := l.ShippedThrough(), l.Store().Tip(); st != tip {
		return buckets.Counts{}, settle, fmt.Errorf("settled with the bucket through %d of %d", st, tip)
	}
	w, err := buckets.Idle(ctx, &c, tick, idleTicks)
	if err != nil {
		return w, settle, err
	}
	// The control: one event must make the loops talk within 100 ticks.
	if err := appendEvents(ctx, l, src, 1); err != nil {
		return w, settle, err
	}
	before := c.Snapshot()
	for range idleTicks {
		if err := tick(ctx); err != nil {
			return w, settle, err
		}
		if c.Snapshot().Sub(before).Writes(blobtier.KindTail) > 0 {
			return w, settle, nil
		}
	}
	return w, settle, errors.New("control: one new event made no tail put within 100 ticks")
}

// syncAppender drives Log.Append in synchronous mode through targets.Drive.
type syncAppender struct {
	ctx context.Context
	l   *bucketlog.Log
	ids []string
	seq atomic.Uint64
}

func (a *syncAppender) Append(p *targets.Payload) error {
	n := a.seq.Add(1)
	_, err := a.l.Append(a.ctx, localseg.Event{ExecutionID: a.ids[n%uint64(len(a.ids))], TransactionID: targets.TxnID(n), Payload: p.S})
	return err
}

func (a *syncAppender) Count() (uint64, error) { return a.l.Store().Tip(), nil }
func (a *syncAppender) Close() error           { return a.l.Close() }

type syncRep struct {
	perSec        float64
	appendsPerPut float64
	cursorPerPut  float64
	appends       uint64
}

// syncOnce opens a fresh synchronous shard (background loops on, default
// tick: every wait kicks it), drives it for env.Duration with writers
// appenders, and counts the tail puts it made.
func syncOnce(ctx context.Context, env *harness.Env, emu *buckets.Emulator, writers int, p *targets.Payload) (syncRep, error) {
	var c buckets.Counter
	l, b, dir, err := countedLog(ctx, env, emu, &c, bucketlog.Options{SyncToBucket: true})
	if err != nil {
		return syncRep{}, err
	}
	defer os.RemoveAll(dir)
	defer b.Close()
	a := &syncAppender{ctx: ctx, l: l, ids: targets.ExecIDs(env.Executions)}
	before := c.Snapshot()
	res, err := targets.Drive(ctx, a, writers, env.Duration, p)
	d := c.Snapshot().Sub(before)
	if cerr := l.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return syncRep{}, err
	}
	tails := d.Writes(blobtier.KindTail)
	if tails == 0 {
		return syncRep{}, fmt.Errorf("no tail put for %d synchronous appends", res.Ops)
	}
	appends := res.Ops + targets.Warmup
	return syncRep{perSec: res.PerSecond(), appendsPerPut: float64(appends) / float64(tails),
		cursorPerPut: float64(d.Writes(blobtier.KindCursor)) / float64(tails), appends: appends}, nil
}

func syncRows(ctx context.Context, env *harness.Env, emu *buckets.Emulator) []harness.Row {
	const section = "tail"
	p := targets.MakePayload(BucketPayload)
	writers := []int{1, 64}
	type cell struct {
		rate, share, cursor []float64
		err                 error
	}
	cells := map[int]*cell{}
	for _, w := range writers {
		cells[w] = &cell{}
	}
	for rep := 0; rep < env.Reps; rep++ {
		for _, w := range writers {
			c := cells[w]
			if c.err != nil || ctx.Err() != nil {
				continue
			}
			r, err := syncOnce(ctx, env, emu, w, &p)
			if err != nil {
				c.err = err
				env.Logf("tail: sync w=%d: %v", w, err)
				continue
			}
			c.rate = append(c.rate, r.perSec)
			c.share = append(c.share, r.appendsPerPut)
			c.cursor = append(c.cursor, r.cursorPerPut)
			env.Logf("tail: sync rep %d w=%d: %.0f appends/s, %.1f appends per tail put", rep+1, w, r.perSec, r.appendsPerPut)
		}
	}
	var rows []harness.Row
	rate := map[int]harness.Row{}
	for _, w := range writers {
		c := cells[w]
		name := fmt.Sprintf("sync, %d B, w=%d", BucketPayload, w)
		if c.err != nil {
			rows = append(rows, harness.Failed(section, name+"/appends/s", "appends/s", c.err),
				harness.Failed(section, name+"/appends per tail put", "appends/put", c.err))
			rate[w] = rows[len(rows)-2]
			continue
		}
		r := harness.Measured(section, name+"/appends/s", "appends/s", "appends/s", c.rate,
			"Options{SyncToBucket: true}: each append returns once its tail object is in gofakes3; background loops on")
		rate[w] = r
		rows = append(rows, r,
			harness.Measured(section, name+"/appends per tail put", "appends per tail put (warm-up included)", "appends/put", c.share,
				fmt.Sprintf("appends waiting at once share one put; %.2f cursor writes per tail put (median)", harness.Median(c.cursor))))
	}
	rows = append(rows, harness.Ratio(section+"/ratio", "sync appends/s w=64 / w=1", rate[64], rate[1], "what sharing a put buys"))
	return rows
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
