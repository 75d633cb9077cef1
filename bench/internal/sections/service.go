package sections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/service"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
)

func init() {
	harness.Register(harness.Section{
		Name: "service",
		Doc: "over the wire against NATS JetStream (sync_interval always): nats Publish/PublishAsync, serve single POSTs, 100-event batches and the Go client, without and with a bucket; " +
			"1, 16, 64 closed-loop clients, 256 B; appends/s, p50, p99; counts checked after each cell and after a SIGKILL and restart",
		Order: 45,
		Run:   runService,
	})
}

// serviceClients are the closed-loop client counts of the cells
// (BENCH_SERVICE_CLIENTS=1,16 narrows them; BENCH_SERVICE_TARGETS=a,b the
// targets, while developing).
var serviceClients = []int{1, 16, 64}

type serviceCell struct {
	label               string
	rate, p50, p99, ops []float64
	err                 error
}

func serviceFilter() (clients []int, keep func(string) bool, err error) {
	clients = serviceClients
	if s := os.Getenv("BENCH_SERVICE_CLIENTS"); s != "" {
		clients = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return nil, nil, fmt.Errorf("BENCH_SERVICE_CLIENTS: %q is not a positive integer", f)
			}
			clients = append(clients, n)
		}
	}
	keep = func(string) bool { return true }
	if s := os.Getenv("BENCH_SERVICE_TARGETS"); s != "" {
		names := strings.Split(s, ",")
		keep = func(n string) bool {
			for _, x := range names {
				if strings.TrimSpace(x) == n {
					return true
				}
			}
			return false
		}
	}
	return clients, keep, nil
}

func runService(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "service"
	clients, keep, err := serviceFilter()
	if err != nil {
		return []harness.Row{harness.Failed(section, "config", "", err)}, nil
	}
	work := filepath.Join(env.WorkDir, "service")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	defer removeAll(env, work)
	env.Logf("service: building ../cmd/bucketlog")
	bin, err := service.BuildBucketlog(ctx, work)
	if err != nil {
		return []harness.Row{harness.Failed(section, "build serve", "", err)}, nil
	}
	emu, err := buckets.StartS3()
	if err != nil {
		return []harness.Row{harness.Failed(section, "gofakes3", "", err)}, nil
	}
	defer emu.Close()
	p := targets.MakePayload(servicePayload)
	sc := &serviceCtx{env: env, bin: bin, emu: emu, payload: p.B}

	var all []serviceTarget
	for _, t := range serviceTargets() {
		if keep(t.name) {
			all = append(all, t)
		}
	}
	type key struct {
		w    int
		name string
	}
	cells := map[key]*serviceCell{}
	for _, w := range clients {
		for _, t := range all {
			cells[key{w, t.name}] = &serviceCell{label: fmt.Sprintf("256B/c=%d/%s", w, t.name)}
		}
	}
	limit, limitErr := []float64{}, error(nil)
	limitTarget, err := targets.TargetByName("limit/zerofill")
	if err != nil {
		return nil, err
	}
	// Repetitions outermost, then client counts, then targets in an order
	// that rotates each repetition: a noisy moment touches every target.
	cell := 0
	for rep := 0; rep < env.Reps; rep++ {
		// The limit loop takes its turn among the one-client cells.
		runLimit := func() error {
			if limitErr != nil || !keep("limit/zerofill") {
				return nil
			}
			dir := filepath.Join(work, fmt.Sprintf("limit-%d", rep))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			lp := targets.MakePayload(servicePayload)
			res, err := appendOnceIn(ctx, dir, limitTarget, &lp, env.Duration)
			removeAll(env, dir)
			if err != nil {
				limitErr = err
			} else {
				limit = append(limit, res.PerSecond())
				env.Logf("service rep %d limit/zerofill: %.0f/s", rep+1, res.PerSecond())
			}
			return nil
		}
		for _, w := range clients {
			for j := range all {
				if w == clients[0] && j == rep%len(all) {
					if err := runLimit(); err != nil {
						return nil, err
					}
				}
				t := all[(j+rep)%len(all)]
				c := cells[key{w, t.name}]
				if c.err != nil {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				cell++
				dir := filepath.Join(work, fmt.Sprintf("cell-%d", cell))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return nil, err
				}
				res, err := t.run(ctx, sc, dir, w, env.Duration)
				removeAll(env, dir)
				if err != nil {
					c.err = err
					env.Logf("service %s: %v", c.label, err)
					continue
				}
				c.rate = append(c.rate, res.PerSecond())
				c.p50 = append(c.p50, micros(res.Quantile(0.50)))
				c.p99 = append(c.p99, micros(res.Quantile(0.99)))
				c.ops = append(c.ops, float64(res.Ops))
				env.Logf("service rep %d %s: %.0f/s p50 %.0f µs p99 %.0f µs (%d events, counts checked, also after SIGKILL+restart)",
					rep+1, c.label, res.PerSecond(), micros(res.Quantile(0.5)), micros(res.Quantile(0.99)), res.Events)
			}
		}
	}

	var rows []harness.Row
	rates := map[key]harness.Row{}
	p99s := map[key]harness.Row{}
	for _, w := range clients {
		for _, t := range all {
			c := cells[key{w, t.name}]
			unit := "appends/s"
			if t.batch > 1 {
				unit = "events/s"
			}
			if c.err != nil {
				r := harness.Failed(section, c.label, unit, c.err)
				rows = append(rows, r)
				rates[key{w, t.name}], p99s[key{w, t.name}] = r, r
				continue
			}
			note := fmt.Sprintf("stored = acknowledged after each rep and after SIGKILL + restart; %.0f requests/rep (median)", harness.Median(c.ops))
			if t.batch > 1 {
				note += fmt.Sprintf("; %d events per request, latency per request", t.batch)
			}
			r := harness.Measured(section, c.label, unit, unit, c.rate, note)
			rows = append(rows, r,
				harness.Measured(section, c.label+"/p50", "latency p50", "µs", c.p50, ""))
			p99 := harness.Measured(section, c.label+"/p99", "latency p99", "µs", c.p99, "")
			rows = append(rows, p99)
			rates[key{w, t.name}], p99s[key{w, t.name}] = r, p99
		}
	}
	var limitRow harness.Row
	if keep("limit/zerofill") {
		if limitErr != nil {
			limitRow = harness.Failed(section, "256B/limit/zerofill", "appends/s", limitErr)
		} else {
			limitRow = harness.Measured(section, "256B/limit/zerofill", "appends/s", "appends/s", limit,
				"pwrite + fdatasync into a zero-filled file, one writer: the disk's fdatasync limit")
		}
		rows = append(rows, limitRow)
	}
	has := func(w int, n string) bool { _, ok := rates[key{w, n}]; return ok }
	for _, w := range clients {
		ratio := func(name string, num, den harness.Row, note string) {
			rows = append(rows, harness.Ratio(section, fmt.Sprintf("c=%d/%s", w, name), num, den, note))
		}
		if has(w, "serve/post") && has(w, "nats/publish") {
			ratio("serve/post / nats/publish", rates[key{w, "serve/post"}], rates[key{w, "nats/publish"}], "TARGET >= 1.3")
			ratio("p99 serve/post / nats/publish", p99s[key{w, "serve/post"}], p99s[key{w, "nats/publish"}], "TARGET <= 1")
		}
		if has(w, "serve/client") && has(w, "nats/publish") {
			ratio("serve/client / nats/publish", rates[key{w, "serve/client"}], rates[key{w, "nats/publish"}], "TARGET >= 1.3")
		}
		if has(w, "serve/batch100") && has(w, "nats/batch100") {
			ratio("serve/batch100 / nats/batch100", rates[key{w, "serve/batch100"}], rates[key{w, "nats/batch100"}], "events/s, TARGET >= 1.3")
			ratio("p99 serve/batch100 / nats/batch100", p99s[key{w, "serve/batch100"}], p99s[key{w, "nats/batch100"}], "TARGET <= 1")
		}
		if has(w, "serve/batch100") && has(w, "nats/publish-async") {
			ratio("serve/batch100 / nats/publish-async", rates[key{w, "serve/batch100"}], rates[key{w, "nats/publish-async"}], "events/s")
		}
		for _, n := range []string{"post", "batch100", "client"} {
			if has(w, "serve+s3/"+n) && has(w, "serve/"+n) {
				ratio("serve+s3/"+n+" / serve/"+n, rates[key{w, "serve+s3/" + n}], rates[key{w, "serve/" + n}], "TARGET >= 0.9 (shipping costs <= 10 %)")
			}
		}
		if w == 1 && keep("limit/zerofill") {
			for _, n := range []string{"serve/post", "serve/client", "nats/publish"} {
				if has(1, n) {
					ratio(n+" / limit/zerofill", rates[key{1, n}], limitRow, "TARGET >= 0.5 for serve")
				}
			}
		}
	}
	return rows, nil
}

// limitSettle is the pause between preparing the limit's file and timing.
const limitSettle = 2 * time.Second

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// appendOnceIn drives target t with one writer for d in dir (the limit
// loop of this section).
func appendOnceIn(ctx context.Context, dir string, t targets.Target, p *targets.Payload, d time.Duration) (targets.DriveResult, error) {
	a, err := t.Open(dir, p)
	if err != nil {
		return targets.DriveResult{}, err
	}
	defer a.Close()
	// Let the disk settle after the file's zero-fill (128 MiB written and
	// fsynced): timed at once, the first fdatasyncs wait for it.
	select {
	case <-ctx.Done():
		return targets.DriveResult{}, ctx.Err()
	case <-time.After(limitSettle):
	}
	return targets.Drive(ctx, a, 1, d, p)
}
