// Command serveprof drives `bucketlog serve` with closed-loop clients
// POSTing single 256 B events (the service section's serve/post cell) and
// writes serve's CPU profile (through its BUCKETLOG_DEBUG_CPUPROFILE).
// With -bin a,b it alternates between prebuilt binaries rep by rep, for an
// interleaved before/after comparison of the append handler.
//
//	cd bench && go run ./cmd/serveprof -clients 1 -duration 10s
//	go tool pprof -top results/profile/serve-cpu.pprof
//	cd bench && go run ./cmd/serveprof -bin /tmp/before,/tmp/after -reps 5 -duration 3s -profile=false
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog/bench/internal/service"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
)

func main() {
	clients := flag.Int("clients", 1, "closed-loop clients")
	d := flag.Duration("duration", 10*time.Second, "timed run per rep")
	reps := flag.Int("reps", 1, "repetitions (per binary)")
	bins := flag.String("bin", "", "comma-separated bucketlog binaries to alternate (default: build ../cmd/bucketlog)")
	batch := flag.Int("batch", 1, "events per POST")
	profile := flag.Bool("profile", true, "write results/profile/serve-cpu[-N].pprof")
	flag.Parse()
	if err := run(*clients, *d, *reps, *bins, *batch, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "serveprof:", err)
		os.Exit(1)
	}
}

func run(clients int, d time.Duration, reps int, bins string, batch int, profile bool) error {
	ctx := context.Background()
	work, err := os.MkdirTemp("", "serveprof-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	var list []string
	if bins == "" {
		b, err := service.BuildBucketlog(ctx, work)
		if err != nil {
			return err
		}
		list = []string{b}
	} else {
		list = strings.Split(bins, ",")
	}
	if err := os.MkdirAll(filepath.Join("results", "profile"), 0o755); err != nil {
		return err
	}
	p := targets.MakePayload(256)
	rates := make([][]float64, len(list))
	cpus := make([][]float64, len(list))
	cell := 0
	for rep := range reps {
		for k, bin := range list {
			cell++
			var env []string
			if profile {
				name := "serve-cpu.pprof"
				if len(list) > 1 {
					name = fmt.Sprintf("serve-cpu-%d.pprof", k)
				}
				abs, _ := filepath.Abs(filepath.Join("results", "profile", name))
				env = []string{"BUCKETLOG_DEBUG_CPUPROFILE=" + abs}
			}
			s, err := service.StartServe(ctx, bin, filepath.Join(work, fmt.Sprint(cell)), nil, env)
			if err != nil {
				return err
			}
			hc := service.NewHTTPClient(clients)
			res, err := service.Loop(ctx, clients, d, func(ctx context.Context, i int, n uint64) (int, error) {
				body := eventsBody(i, n, batch, p.B)
				return service.Post(ctx, hc, s.URL, body, batch > 1)
			})
			hc.CloseIdleConnections()
			if err == nil {
				var got uint64
				got, err = s.Count(ctx)
				if err == nil && got != res.Events {
					err = fmt.Errorf("serve holds %d events, %d acknowledged", got, res.Events)
				}
			}
			if serr := s.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("serve's stop: %w", serr)
			}
			if err != nil {
				return err
			}
			rates[k] = append(rates[k], res.PerSecond())
			cpu := float64(s.CPU.Microseconds()) / float64(res.Ops)
			cpus[k] = append(cpus[k], cpu)
			fmt.Printf("rep %d %s: %.0f events/s, p50 %v, p99 %v, serve CPU %.1f µs/request (whole process, start to stop)\n",
				rep+1, bin, res.PerSecond(), res.Quantile(0.5), res.Quantile(0.99), cpu)
		}
	}
	for k, bin := range list {
		fmt.Printf("median %s: %.0f events/s, %.1f µs serve CPU/request over %d reps %.0f %.1f\n", bin, median(rates[k]), median(cpus[k]), len(rates[k]), rates[k], cpus[k])
	}
	if len(list) == 2 {
		fmt.Printf("ratio %s / %s: %.3f events/s, %.3f CPU/request\n", list[1], list[0], median(rates[1])/median(rates[0]), median(cpus[1])/median(cpus[0]))
	}
	return nil
}

func eventsBody(i int, n uint64, batch int, payload []byte) []byte {
	ex, tx := fmt.Sprintf("exec-%05d", i), func(k int) string { return fmt.Sprintf("c%d-%d", i, n*uint64(batch)+uint64(k)) }
	if batch == 1 {
		return service.EventJSON(nil, ex, tx(0), payload)
	}
	b := []byte(`{"events":[`)
	for k := range batch {
		if k > 0 {
			b = append(b, ',')
		}
		b = service.EventJSON(b, ex, tx(k), payload)
	}
	return append(b, "]}"...)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
