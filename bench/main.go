// Command bench compares bucketlog with its peers and with the physical
// limits of the disk it runs on, in one run, and prints one table (and
// writes it as JSON under results/).
//
// Usage (from the bench directory):
//
//	go run .                 # the full run (a few minutes on 2 cores)
//	go run . -quick          # CI-sized
//	go run . -sections append -payloads 256 -writers 1
//	go run . -list           # the sections
//
// Every number is measured in this run: appends are acknowledged only after
// fsync/fdatasync, replays read every record back, memory is read from
// /proc in a fresh process. Ratios are taken between medians of the same
// run. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog/bench/internal/harness"
	_ "github.com/bucketlog/bucketlog/bench/internal/sections"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == harness.ChildFlag {
		os.Exit(runChild(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

func runChild(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "bench: -child needs a name")
		return 2
	}
	f, ok := harness.LookupChild(args[0])
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown child %q\n", args[0])
		return 2
	}
	if err := f(args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: child %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func run(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "CI-sized run: -duration 250ms -reps 3 -events 100000 unless given")
	duration := fs.Duration("duration", time.Second, "length of one timed append repetition")
	reps := fs.Int("reps", 5, "repetitions per measurement (rows report the median)")
	events := fs.Int("events", 1_000_000, "events in the large store of the open, replay and memory sections (the mid store is a tenth)")
	execs := fs.Int("executions", 10_000, "execution ids the stores spread their events over")
	writers := fs.String("writers", "1,8,64", "concurrent writers of the append section, ascending")
	payloads := fs.String("payloads", "256,4096", "payload sizes in bytes of the append section")
	sections := fs.String("sections", "default", `sections to run, comma-separated ("all", "default", or names from -list)`)
	list := fs.Bool("list", false, "list the sections and exit")
	dir := fs.String("dir", os.TempDir(), "parent of the scratch directory; must be the disk under test (not tmpfs)")
	allowTmpfs := fs.Bool("allow-tmpfs", false, "run even if -dir is on tmpfs (fsync numbers are then meaningless)")
	keep := fs.Bool("keep", false, "keep the scratch directory")
	out := fs.String("out", "", "JSON output path (default results/<time>.json)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (every selected section) to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *list {
		for _, s := range harness.Sections() {
			def := ""
			if s.Default {
				def = " (default)"
			}
			fmt.Printf("%-10s %s%s\n", s.Name, s.Doc, def)
		}
		return 0
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["duration"] {
			*duration = 250 * time.Millisecond
		}
		if !set["reps"] {
			*reps = 3
		}
		if !set["events"] {
			*events = 100_000
		}
	}
	ws, err := parseInts(*writers)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -writers: %v\n", err)
		return 2
	}
	if !slices.IsSorted(ws) {
		fmt.Fprintln(os.Stderr, "bench: -writers must be ascending")
		return 2
	}
	ps, err := parseInts(*payloads)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -payloads: %v\n", err)
		return 2
	}
	if *reps < 1 || *duration <= 0 || *events < 1000 || *execs < 1 {
		fmt.Fprintln(os.Stderr, "bench: -reps and -duration must be positive, -events at least 1000, -executions at least 1")
		return 2
	}
	selected, err := harness.Select(*sections)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -sections: %v\n", err)
		return 2
	}
	if harness.IsMemoryFS(*dir) && !*allowTmpfs {
		fmt.Fprintf(os.Stderr, "bench: %s is on a memory filesystem; fsync would prove nothing (use -dir or -allow-tmpfs)\n", *dir)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	work, err := os.MkdirTemp(*dir, "bucketlog-bench-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if !*keep {
		defer os.RemoveAll(work)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	env := &harness.Env{
		Config: harness.Config{
			Quick: *quick, Duration: *duration, Reps: *reps, Events: *events, Executions: *execs,
			Writers: ws, Payloads: ps, WorkDir: work, Keep: *keep, Self: self, Log: os.Stderr,
		},
		Fixtures: harness.NewFixtures(work),
	}
	cfg := map[string]any{
		"quick": *quick, "duration": duration.String(), "reps": *reps, "events": *events,
		"executions": *execs, "writers": ws, "payloads": ps,
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	started := time.Now()
	machine := harness.DescribeMachine(work, "..")
	harness.PrintHeader(os.Stdout, machine, cfg)

	res := &harness.Result{Started: started, Machine: machine, Config: cfg, SectionLoad: map[string]string{}}
	for _, s := range selected {
		res.Sections = append(res.Sections, s.Name)
		res.SectionLoad[s.Name] = harness.LoadAvg()
		env.Logf("section %s (load %s)", s.Name, res.SectionLoad[s.Name])
		t0 := time.Now()
		rows, err := s.Run(ctx, env)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "bench: interrupted")
				return 1
			}
			rows = append(rows, harness.Failed(s.Name, "section", "", err))
		}
		env.Logf("section %s took %v", s.Name, time.Since(t0).Round(time.Millisecond))
		res.Rows = append(res.Rows, rows...)
	}
	res.Machine.LoadEnd = harness.LoadAvg()
	res.Elapsed = time.Since(started).Round(time.Millisecond).String()
	harness.PrintTable(os.Stdout, res.Rows)
	fmt.Printf("\nload at end %s; elapsed %s\n", res.Machine.LoadEnd, res.Elapsed)

	path := *out
	if path == "" {
		path = filepath.Join("results", started.Format("20060102-150405")+".json")
	}
	if err := harness.WriteJSON(path, res); err != nil {
		fmt.Fprintf(os.Stderr, "bench: write %s: %v\n", path, err)
		return 1
	}
	fmt.Printf("wrote %s\n", path)
	for _, r := range res.Rows {
		if r.Err != "" {
			return 3
		}
	}
	return 0
}
