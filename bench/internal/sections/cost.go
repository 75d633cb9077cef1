package sections

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	harness.Register(harness.Section{
		Name:  "cost",
		Doc:   "requests and list-price dollars per shard-month: idle, 1, 100 and 10,000 events/s, async (simulated clock, Ship per default tick) and sync (20 ms injected, real time)",
		Order: 44,
		Run:   runCost,
	})
}

// Price list (USD per 1,000 requests). S3 Standard bills PUT, COPY, POST
// and LIST at the first, GET and HEAD at the second, DELETE at nothing; GCS
// Standard's class A (insert, list) and class B (get, metadata get) are the
// same two prices and its delete is free too, so one price serves both for
// the requests this engine makes.
const (
	priceClassA = 0.005
	priceClassB = 0.0004
)

// Months and ticks: a month is 30 days.
const (
	secondsPerMonth = 30 * 24 * 3600
	// costPayload is the payload of every event of the section.
	costPayload = BucketPayload
)

// costRates are the event rates of the table (0: idle).
var costRates = []int{0, 1, 100, 10_000}

// asyncCostTicks is how many ticks of the default interval each async cell
// measures: whole seal-by-age cycles (15 minutes = 60 ticks) at low rates,
// several size seals (8 MiB) at high ones.
func asyncCostTicks(rate int, quick bool) int {
	switch {
	case rate == 0, rate == 1:
		if quick {
			return 120
		}
		return 240
	case rate <= 100:
		if quick {
			return 40
		}
		return 120
	default:
		if quick {
			return 2
		}
		return 4
	}
}

// syncCostWindow is the real-time window of a sync cell.
func syncCostWindow(rate int, quick bool) time.Duration {
	d := 3 * time.Second
	if rate <= 1 {
		d = 10 * time.Second
	}
	if quick {
		d /= 2
	}
	return d
}

// costCell is one measured cell: the requests by blobtier operation and
// key kind, the HTTP requests as billed, and the scale to a month.
type costCell struct {
	mode     string
	rate     int
	counts   buckets.Counts
	http     map[string]int64
	perMonth float64 // multiplier from the window to a month
	window   string  // what was measured
	achieved float64 // events/s actually appended (sync)
	p50, p99 time.Duration
}

func (c costCell) monthly(n int64) float64 { return float64(n) * c.perMonth }

// dollars prices the billed HTTP requests of a month.
func (c costCell) dollars() (a, b, total float64) {
	classA := c.http["PUT"] + c.http["POST"] + c.http["LIST"]
	classB := c.http["GET"] + c.http["HEAD"]
	a = c.monthly(classA) / 1000 * priceClassA
	b = c.monthly(classB) / 1000 * priceClassB
	return a, b, a + b
}

// whereMoney names the dearest (operation, kind) pairs of the cell, priced
// at the blobtier level (put and cas and list: class A; get and stat:
// class B).
func (c costCell) whereMoney() string {
	type part struct {
		name string
		usd  float64
		n    float64
	}
	var parts []part
	var total float64
	for ok, n := range c.counts.ByOpKind {
		price := 0.0
		switch ok.Op {
		case blobtier.OpPut, blobtier.OpCAS, blobtier.OpList:
			price = priceClassA
		case blobtier.OpGet, blobtier.OpStat:
			price = priceClassB
		}
		kind := "?"
		if ok.Kind != 0 {
			kind = ok.Kind.String()
		}
		usd := c.monthly(n) / 1000 * price
		total += usd
		parts = append(parts, part{fmt.Sprintf("%s %s", ok.Op, kind), usd, c.monthly(n)})
	}
	if total == 0 {
		return "nothing"
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].usd > parts[j].usd })
	var out []string
	for _, p := range parts {
		out = append(out, fmt.Sprintf("%s %.0f/mo $%.2f (%.0f%%)", p.name, p.n, p.usd, 100*p.usd/total))
	}
	return strings.Join(out, "; ")
}

func runCost(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	var rows []harness.Row
	segments := map[int]float64{}
	for _, rate := range costRates {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := asyncCost(ctx, env, rate)
		if err == nil {
			segments[rate] = c.segmentDollars()
		}
		rows = append(rows, costRows(env, "async", rate, c, err, 0)...)
	}
	for _, rate := range costRates[1:] {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := syncCost(ctx, env, rate)
		rows = append(rows, costRows(env, "sync", rate, c, err, segments[rate])...)
	}
	return rows, nil
}

func rateLabel(rate int) string {
	if rate == 0 {
		return "idle"
	}
	return fmt.Sprintf("%s events/s", countLabel(rate))
}

// segmentDollars prices the month's requests on segment keys (the upload
// and its read-back) and index keys (the derived index object put beside
// each segment), at the HTTP level: a blobtier Get is one GET (the
// response carries the metadata), a Stat one HEAD.
func (c costCell) segmentDollars() float64 {
	var usd float64
	for ok, n := range c.counts.ByOpKind {
		if ok.Kind != blobtier.KindSegment && ok.Kind != blobtier.KindIndex {
			continue
		}
		switch ok.Op {
		case blobtier.OpPut, blobtier.OpCAS, blobtier.OpList:
			usd += c.monthly(n) / 1000 * priceClassA
		case blobtier.OpGet, blobtier.OpStat:
			usd += c.monthly(n) / 1000 * priceClassB
		}
	}
	return usd
}

// costRows makes a cell's two rows. segments is, for a sync cell, what the
// async cell at the same rate paid for segment uploads: the same bytes
// seal into the same segments in either mode, and the short real-time
// window of a sync cell holds few or none of them.
func costRows(env *harness.Env, mode string, rate int, c costCell, err error, segments float64) []harness.Row {
	const section = "cost"
	name := fmt.Sprintf("%s, %s", mode, rateLabel(rate))
	if err != nil {
		env.Logf("cost: %s: %v", name, err)
		return []harness.Row{harness.Failed(section, name+"/requests per month", "requests/month", err),
			harness.Failed(section, name+"/USD per month", "USD/month", err)}
	}
	var billed int64
	var methods []string
	for m, n := range c.http {
		billed += n
		methods = append(methods, fmt.Sprintf("%s %.0f", m, c.monthly(n)))
	}
	sort.Strings(methods)
	a, b, total := c.dollars()
	note := fmt.Sprintf("%s; HTTP per month: %s", c.window, strings.Join(methods, ", "))
	if len(methods) == 0 {
		note = c.window + "; no HTTP request"
	}
	if mode == "async" && rate > 0 {
		note = "TARGET ≤ $2; " + note
	}
	if mode == "async" && rate == 0 {
		note = "TARGET 0 requests; " + note
	}
	if mode == "sync" {
		note += fmt.Sprintf("; plus $%.2f a month of segment uploads at this rate (the async cell's)", segments)
		note += fmt.Sprintf("; appended %.0f events/s, append p50 %v p99 %v", c.achieved, c.p50.Round(100*time.Microsecond), c.p99.Round(100*time.Microsecond))
	}
	env.Logf("cost: %s: %.0f requests/month, $%.2f; %s", name, c.monthly(billed), total, c.whereMoney())
	return []harness.Row{
		{Section: section, Name: name + "/requests per month", Metric: "HTTP requests per 30-day month", Unit: "requests/month",
			Value: c.monthly(billed), Note: note},
		{Section: section, Name: name + "/USD per month", Metric: "list price of the month's requests (S3 Standard = GCS Standard here)", Unit: "USD/month",
			Value: total, Note: fmt.Sprintf("class A $%.3f, class B $%.3f; by operation and key: %s", a, b, c.whereMoney())},
	}
}

// costLog opens a shard on a fresh bucket of emu, counted by c at the
// blobtier level and by the returned transport at the HTTP level (which
// waits delay before every request).
func costLog(ctx context.Context, env *harness.Env, emu *buckets.Emulator, c *buckets.Counter, delay time.Duration, opts bucketlog.Options, wrap ...func(blobtier.Bucket) blobtier.Bucket) (*bucketlog.Log, *buckets.DelayTransport, func(), error) {
	name, err := emu.NewBucket("cost")
	if err != nil {
		return nil, nil, nil, err
	}
	b, tr, err := emu.OpenDelayed(ctx, name, delay)
	if err != nil {
		return nil, nil, nil, err
	}
	dir, err := tempDir(env.WorkDir, "cost-")
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	opts.Dir, opts.Bucket, opts.Logger = dir, c.Wrap(b), warnLogger()
	for _, w := range wrap {
		opts.Bucket = w(opts.Bucket)
	}
	l, err := bucketlog.Open(ctx, opts)
	if err != nil {
		b.Close()
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return l, tr, func() { l.Close(); b.Close(); os.RemoveAll(dir) }, nil
}

// checkBilled compares the two counts of a cell: every blobtier write
// (put, put-if-absent, compare-and-swap) must be exactly one HTTP PUT (no
// multipart upload, whose parts and POSTs would be billed apart) and every
// blobtier listing at least one LIST, or the table prices requests that
// were not made.
func checkBilled(c costCell) error {
	writes := c.counts.ByOp[blobtier.OpPut] + c.counts.ByOp[blobtier.OpCAS]
	if c.http["PUT"] != writes || c.http["POST"] != 0 {
		return fmt.Errorf("%d blobtier writes became %d HTTP PUTs and %d POSTs", writes, c.http["PUT"], c.http["POST"])
	}
	if lists := c.counts.ByOp[blobtier.OpList]; c.http["LIST"] < lists {
		return fmt.Errorf("%d blobtier listings, %d HTTP LISTs", lists, c.http["LIST"])
	}
	return nil
}

func subMethods(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// asyncCost drives one async shard with a simulated clock: the engine's
// background loops off (NoBackground), and per tick rate×15 s events
// appended, the clock moved by the default tick, one Log.Tick (the pass the
// engine's ticker would run, with the uploads and seals by age it does).
// Two warm-up ticks (the first cursor object, the open's leftovers) are not
// counted. A month is the window's requests × ticks per month ÷ ticks
// measured: the window holds whole seal-by-age cycles at the low rates and
// several size seals at the high ones, so seals are in it in proportion.
func asyncCost(ctx context.Context, env *harness.Env, rate int) (costCell, error) {
	cell := costCell{mode: "async", rate: rate}
	emu, err := buckets.StartS3()
	if err != nil {
		return cell, err
	}
	defer emu.Close()
	var c buckets.Counter
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, tr, done, err := costLog(ctx, env, emu, &c, 0, bucketlog.Options{NoBackground: true, Now: clock.Now})
	if err != nil {
		return cell, err
	}
	defer done()
	interval := bucketlog.DefaultTailInterval
	perTick := rate * int(interval/time.Second)
	src := newEventSource(costPayload, env.Executions)
	tick := func() error {
		if err := appendEvents(ctx, l, src, perTick); err != nil {
			return err
		}
		clock.Advance(interval)
		_, err := l.Tick(ctx)
		return err
	}
	if rate == 0 {
		// The idle shard had events once: they were shipped, and the
		// seal by age of their segment has come and gone.
		if err := appendEvents(ctx, l, src, 1000); err != nil {
			return cell, err
		}
		// Quiet for longer than the seal by age, so that seal is behind.
		quiet := int(bucketlog.DefaultSealMaxAge/interval) + 10
		if _, err := buckets.Settle(ctx, &c, func(context.Context) error { return tick() }, quiet, 400); err != nil {
			return cell, err
		}
	}
	for range 2 {
		if err := tick(); err != nil {
			return cell, err
		}
	}
	ticks := asyncCostTicks(rate, env.Quick)
	before, hb := c.Snapshot(), tr.Methods()
	b0, _, err := localBytes(l)
	if err != nil {
		return cell, err
	}
	for i := range ticks {
		if err := tick(); err != nil {
			return cell, fmt.Errorf("tick %d: %w", i+1, err)
		}
	}
	cell.counts, cell.http = c.Snapshot().Sub(before), subMethods(tr.Methods(), hb)
	if cell.counts.Errors > 0 {
		return cell, fmt.Errorf("%d requests failed", cell.counts.Errors)
	}
	if err := checkBilled(cell); err != nil {
		return cell, err
	}
	if rate > 0 && l.ShippedThrough() != l.Store().Tip() {
		return cell, fmt.Errorf("after the last tick the bucket holds through %d of %d", l.ShippedThrough(), l.Store().Tip())
	}
	b1, _, err := localBytes(l)
	if err != nil {
		return cell, err
	}
	ticksPerMonth := float64(secondsPerMonth) / interval.Seconds()
	cell.perMonth = ticksPerMonth / float64(ticks)
	cell.window = fmt.Sprintf("simulated %v (%d ticks of %v, Log.Tick per tick, clock moved per tick) ×%.0f; %s appended, %d segment puts; %d B payloads",
		time.Duration(ticks)*interval, ticks, interval, cell.perMonth, mibLabel(b1-b0), cell.counts.Writes(blobtier.KindSegment), costPayload)
	return cell, nil
}

// syncCost drives one synchronous shard (background loops on, default
// tick) in real time, every HTTP request delayed 20 ms: events arrive at
// rate per second, each appended by a goroutine of its own (an open
// loop: a slow put does not slow the arrivals), for a window, and the
// window's requests are scaled to a month by seconds. The group a tail put
// carries is what arrived during the previous put, so the count depends on
// the round trip: that is why this cell runs at a realistic one in real
// time instead of on a simulated clock. Seals by age (one per 15 minutes)
// fall outside the short window; at 1 event/s they add about 2,880 segment
// puts a month, beside the ~2.6 million tail puts.
func syncCost(ctx context.Context, env *harness.Env, rate int) (costCell, error) {
	cell := costCell{mode: "sync", rate: rate}
	emu, err := buckets.StartS3()
	if err != nil {
		return cell, err
	}
	defer emu.Close()
	var c buckets.Counter
	l, tr, done, err := costLog(ctx, env, emu, &c, latencyDelay, bucketlog.Options{SyncToBucket: true})
	if err != nil {
		return cell, err
	}
	defer done()
	src := newEventSource(costPayload, env.Executions)
	var srcMu sync.Mutex
	next := func() localseg.Event {
		srcMu.Lock()
		defer srcMu.Unlock()
		return src.event()
	}
	// Warm-up: one synchronous append (the first tail put and cursor
	// object), not counted.
	if _, err := l.Append(ctx, next()); err != nil {
		return cell, err
	}
	window := syncCostWindow(rate, env.Quick)
	before, hb := c.Snapshot(), tr.Methods()
	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		firstErr atomic.Value
		latMu    sync.Mutex
		lats     []time.Duration
	)
	start := time.Now()
	launched := 0
	var arrivals time.Duration
	for {
		el := time.Since(start)
		if el >= window || ctx.Err() != nil {
			arrivals = el
			break
		}
		due := int(el.Seconds() * float64(rate))
		for ; launched <= due; launched++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				if _, err := l.Append(ctx, next()); err != nil {
					if failed.Add(1) == 1 {
						firstErr.Store(err)
					}
					return
				}
				d := time.Since(t0)
				latMu.Lock()
				lats = append(lats, d)
				latMu.Unlock()
			}()
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cell.counts, cell.http = c.Snapshot().Sub(before), subMethods(tr.Methods(), hb)
	if n := failed.Load(); n > 0 {
		return cell, fmt.Errorf("%d of %d synchronous appends failed: %v", n, launched, firstErr.Load())
	}
	if err := checkBilled(cell); err != nil {
		return cell, err
	}
	// The requests of the drain after the window belong to the window's
	// arrivals: a month is secondsPerMonth of arrivals.
	cell.achieved = float64(launched) / arrivals.Seconds()
	cell.p50, cell.p99 = percentile(lats, 0.50), percentile(lats, 0.99)
	cell.perMonth = float64(secondsPerMonth) / arrivals.Seconds()
	cell.window = fmt.Sprintf("real %v of arrivals (%v with the drain), %v injected per HTTP request, %d appends, %d tail puts, %d segment puts ×%.0f; %d B payloads",
		arrivals.Round(time.Millisecond), elapsed.Round(time.Millisecond), latencyDelay, launched, cell.counts.Writes(blobtier.KindTail), cell.counts.Writes(blobtier.KindSegment), cell.perMonth, costPayload)
	return cell, nil
}
