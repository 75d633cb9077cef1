// Command profile drives one append target for a while and writes CPU,
// allocation and (optionally) mutex and block profiles of its append path,
// for `go tool pprof`.
//
//	cd bench && go run ./cmd/profile -writers 1 -payload 256 -duration 10s
//	go tool pprof -top results/profile/append-cpu.pprof
//
// The appends are real: every one waits for its fsync, and the run checks
// afterwards that the log holds exactly what was acknowledged.
//
// With -replay N it instead builds a store of N events of -payload bytes
// (not profiled) and profiles opening it and reading every record back:
//
//	go run ./cmd/profile -replay 1000000 -target bucketlog
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"time"

	"github.com/bucketlog/bucketlog/bench/internal/targets"
	"github.com/bucketlog/bucketlog/localseg"
)

func main() { os.Exit(run()) }

func run() int {
	target := flag.String("target", "bucketlog", "append target (bucketlog, tidwall-wal, raft-wal, tidwall-wal/batch, raft-wal/batch, limit/plain, limit/fallocate, limit/zerofill)")
	writers := flag.Int("writers", 1, "concurrent writers")
	payload := flag.Int("payload", 256, "payload size in bytes")
	duration := flag.Duration("duration", 10*time.Second, "how long to append")
	dir := flag.String("dir", os.TempDir(), "parent of the scratch directory (the disk under test)")
	outDir := flag.String("out", filepath.Join("results", "profile"), "directory for the profiles")
	mutex := flag.Bool("mutex", false, "also write a mutex contention profile")
	block := flag.Bool("block", false, "also write a blocking profile (slows the run)")
	iotime := flag.Bool("iotime", false, "bucketlog only: open the store over a counting FS and print where the wall time went (fsyncs, directory fsyncs, writes, segment preallocation)")
	noPrealloc := flag.Bool("no-prealloc", false, "bucketlog only: open with Options.NoPreallocate")
	replay := flag.Int("replay", 0, "profile open + read-back of a store of this many events instead of appends (targets: bucketlog, tidwall-wal, raft-wal)")
	flag.Parse()
	if *replay > 0 {
		return runReplay(*target, *replay, *payload, *dir, *outDir)
	}

	t, err := targets.TargetByName(*target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 2
	}
	if *writers < 1 || *payload < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "profile: -writers, -payload and -duration must be positive")
		return 2
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	work, err := os.MkdirTemp(*dir, "bucketlog-profile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	defer os.RemoveAll(work)

	p := targets.MakePayload(*payload)
	var io targets.IOCounts
	var a targets.Appender
	if *iotime || *noPrealloc {
		if t.Name != "bucketlog" {
			fmt.Fprintln(os.Stderr, "profile: -iotime and -no-prealloc apply to bucketlog only")
			return 2
		}
		opts := localseg.Options{NoPreallocate: *noPrealloc}
		if *iotime {
			opts.FS = targets.NewIOCountingFS(&io)
		}
		a, err = targets.OpenBucketlog(work, opts)
	} else {
		a, err = t.Open(work, &p)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile: open %s: %v\n", t.Name, err)
		return 1
	}
	defer a.Close()
	lat := &timedAppender{Appender: a, d: make([]time.Duration, 1<<22)}

	if *mutex {
		runtime.SetMutexProfileFraction(1)
	}
	if *block {
		runtime.SetBlockProfileRate(1)
	}
	cpuPath := filepath.Join(*outDir, "append-cpu.pprof")
	cpu, err := os.Create(cpuPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, driveErr := targets.Drive(ctx, lat, *writers, *duration, &p)
	pprof.StopCPUProfile()
	cpu.Close()
	if driveErr != nil {
		fmt.Fprintf(os.Stderr, "profile: %s: %v\n", t.Name, driveErr)
		return 1
	}
	written := []string{cpuPath}
	for _, prof := range []struct {
		name, file string
		on         bool
	}{
		{"allocs", "append-allocs.pprof", true},
		{"mutex", "append-mutex.pprof", *mutex},
		{"block", "append-block.pprof", *block},
	} {
		if !prof.on {
			continue
		}
		path := filepath.Join(*outDir, prof.file)
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return 1
		}
		err = pprof.Lookup(prof.name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return 1
		}
		written = append(written, path)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("%s: %d writers, %d B payload: %d appends in %v = %.0f appends/s; %.1f allocs/append, %.0f B allocated/append\n",
		t.Name, *writers, *payload, res.Ops, res.Elapsed.Round(time.Millisecond), res.PerSecond(),
		float64(ms.Mallocs-before.Mallocs)/float64(res.Ops+targets.Warmup), float64(ms.TotalAlloc-before.TotalAlloc)/float64(res.Ops+targets.Warmup))
	if *iotime {
		fmt.Println("I/O from open to the end (open included):", io.Breakdown(res.Elapsed))
	}
	if res.Seals > 0 {
		fmt.Printf("segment seals in the timed part: %d (%.1f/s)\n", res.Seals, float64(res.Seals)/res.Elapsed.Seconds())
	}
	if res.Fsyncs > 0 {
		fmt.Printf("fsyncs (from the store's Observer): %d, %.1f appends/fsync, mean %v\n",
			res.Fsyncs, res.AppendsPerFsync(), (res.FsyncTime / time.Duration(res.Fsyncs)).Round(time.Microsecond))
	}
	fmt.Println(lat.summary())
	for _, w := range written {
		fmt.Println("wrote", w)
	}
	return 0
}

// timedAppender records the latency of each append (the first 4M of them)
// without a lock, so it adds no contention between writers.
type timedAppender struct {
	targets.Appender
	d []time.Duration
	n atomic.Int64
}

func (t *timedAppender) Append(p *targets.Payload) error {
	t0 := time.Now()
	err := t.Appender.Append(p)
	if i := t.n.Add(1) - 1; i < int64(len(t.d)) {
		t.d[i] = time.Since(t0)
	}
	return err
}

func (t *timedAppender) summary() string {
	n := min(t.n.Load(), int64(len(t.d)))
	if n == 0 {
		return "latency: no appends"
	}
	d := slices.Clone(t.d[:n])
	slices.Sort(d)
	q := func(f float64) time.Duration { return d[min(int(float64(n)*f), int(n)-1)].Round(time.Microsecond) }
	return fmt.Sprintf("append latency: p50 %v, p90 %v, p99 %v, max %v (%d appends incl. warm-up)", q(0.5), q(0.9), q(0.99), d[n-1].Round(time.Microsecond), n)
}

// runReplay profiles System.Replay of a store of n events.
func runReplay(target string, n, payload int, dir, outDir string) int {
	var sys *targets.System
	for _, s := range targets.Systems() {
		if s.Name == target {
			sys = &s
		}
	}
	if sys == nil {
		fmt.Fprintf(os.Stderr, "profile: -replay: unknown system %q\n", target)
		return 2
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	work, err := os.MkdirTemp(dir, "bucketlog-profile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	defer os.RemoveAll(work)
	p := targets.MakePayload(payload)
	t0 := time.Now()
	if err := sys.Build(work, n, &p, 10_000); err != nil {
		fmt.Fprintln(os.Stderr, "profile: build:", err)
		return 1
	}
	fmt.Printf("built %d events in %v\n", n, time.Since(t0).Round(time.Millisecond))
	cpuPath := filepath.Join(outDir, "replay-cpu.pprof")
	cpu, err := os.Create(cpuPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := pprof.StartCPUProfile(cpu); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	t0 = time.Now()
	got, err := sys.Replay(work, payload)
	d := time.Since(t0)
	pprof.StopCPUProfile()
	cpu.Close()
	if err == nil && got != uint64(n) {
		err = fmt.Errorf("read back %d of %d", got, n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile: replay:", err)
		return 1
	}
	runtime.ReadMemStats(&after)
	allocPath := filepath.Join(outDir, "replay-allocs.pprof")
	f, err := os.Create(allocPath)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return 1
	}
	fmt.Printf("%s: open + read back %d events in %v = %.0f events/s; %.1f allocs/event, %.0f B allocated/event\n",
		sys.Name, n, d.Round(time.Millisecond), float64(n)/d.Seconds(),
		float64(after.Mallocs-before.Mallocs)/float64(n), float64(after.TotalAlloc-before.TotalAlloc)/float64(n))
	fmt.Println("wrote", cpuPath)
	fmt.Println("wrote", allocPath)
	return 0
}

// Fsyncs and Seals pass the wrapped target's counters through, so Drive
// still reports them.
func (t *timedAppender) Fsyncs() (uint64, time.Duration) {
	if fc, ok := t.Appender.(targets.FsyncCounter); ok {
		return fc.Fsyncs()
	}
	return 0, 0
}

func (t *timedAppender) Seals() uint64 {
	if sc, ok := t.Appender.(targets.SealCounter); ok {
		return sc.Seals()
	}
	return 0
}
