// Package harness is the frame of the comparison bench: a registry of
// sections, each of which measures something real and returns rows; the
// configuration they share; and the table and JSON output of one run.
//
// A section is added by calling Register from an init function in package
// sections (or any package the main program imports). Sections run in their
// Order, each at most once per run, and a section that
// fails does not stop the others: its error is reported as a row.
//
// Nothing in this package estimates a number: every row a section returns
// must come from work done in this run. Ratios are computed from medians of
// the same run (see Ratio).
package harness

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Config is what the command line chose. Sections read it; they do not
// change it.
type Config struct {
	// Quick selects CI-sized defaults (short durations, smaller stores).
	Quick bool
	// Duration is how long one timed repetition of a throughput
	// measurement runs.
	Duration time.Duration
	// Reps is how many repetitions each measurement takes; rows report the
	// median.
	Reps int
	// Events is the size of the "large" store used by the open, replay and
	// memory sections (1M in a full run).
	Events int
	// Executions is how many distinct execution ids the large stores spread
	// their events over.
	Executions int
	// Writers are the concurrency levels of the append section.
	Writers []int
	// Payloads are the payload sizes in bytes of the append section.
	Payloads []int
	// WorkDir is a scratch directory on the filesystem under test; the run
	// removes it at the end unless Keep is set.
	WorkDir string
	Keep    bool
	// Self is the path of the running executable, for child processes.
	Self string
	// Log receives progress lines (stderr).
	Log io.Writer
}

// Logf writes one progress line.
func (c *Config) Logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "# "+format+"\n", args...)
	}
}

// Row is one measured number.
type Row struct {
	Section string `json:"section"`
	// Name identifies what was measured, as slash-separated words, for
	// example "256B/w=8/bucketlog".
	Name   string  `json:"name"`
	Metric string  `json:"metric"` // what Value is, for example "appends/s"
	Value  float64 `json:"value"`  // median of Reps (or the ratio)
	Unit   string  `json:"unit"`
	// Reps holds every repetition in the order taken; empty for ratios.
	Reps []float64 `json:"reps,omitempty"`
	Note string    `json:"note,omitempty"`
	// Err is set when the measurement could not be taken; Value is then 0.
	Err string `json:"error,omitempty"`
}

// Section is one group of measurements.
type Section struct {
	Name string
	// Doc is one line for -list.
	Doc string
	// Run measures and returns rows. It should honour ctx between
	// repetitions. Rows for measurements that failed carry Err.
	Run func(ctx context.Context, env *Env) ([]Row, error)
	// Default says whether the section runs when -sections is not given.
	Default bool
	// Order places the section in a run and in the table (ascending; ties
	// by name), independent of file and init order. Current: append 10,
	// open 20, memory 30, and the bucket sections restore 40, tail 41, gc
	// 42.
	Order int
}

var (
	registryMu sync.Mutex
	registry   []Section
	children   = map[string]ChildFunc{}
)

// Register adds a section. Names must be unique; a duplicate panics at init
// time, which is a programming error caught by any run.
func Register(s Section) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, r := range registry {
		if r.Name == s.Name {
			panic("harness: duplicate section " + s.Name)
		}
	}
	registry = append(registry, s)
	sort.SliceStable(registry, func(i, j int) bool {
		if registry[i].Order != registry[j].Order {
			return registry[i].Order < registry[j].Order
		}
		return registry[i].Name < registry[j].Name
	})
}

// Sections returns the registered sections in run order.
func Sections() []Section {
	registryMu.Lock()
	defer registryMu.Unlock()
	return append([]Section(nil), registry...)
}

// Select resolves a comma-separated list of section names ("" or "default":
// the default set; "all": every section).
func Select(list string) ([]Section, error) {
	all := Sections()
	list = strings.TrimSpace(list)
	if list == "" || list == "default" {
		var out []Section
		for _, s := range all {
			if s.Default {
				out = append(out, s)
			}
		}
		return out, nil
	}
	if list == "all" {
		return all, nil
	}
	byName := map[string]Section{}
	for _, s := range all {
		byName[s.Name] = s
	}
	var out []Section
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		s, ok := byName[name]
		if !ok {
			names := make([]string, 0, len(all))
			for _, s := range all {
				names = append(names, s.Name)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("unknown section %q (have: %s)", name, strings.Join(names, ", "))
		}
		seen[name] = true
		out = append(out, s)
	}
	// Keep run order so a run's table reads the same whatever the order on
	// the command line.
	order := map[string]int{}
	for i, s := range all {
		order[s.Name] = i
	}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Name] < order[out[j].Name] })
	return out, nil
}

// Env is what a running section gets: the configuration and the helpers
// shared by sections of one run.
type Env struct {
	Config
	// Fixtures caches stores built once per run and shared by sections
	// (the open, replay and memory sections read the same 1M-event store).
	Fixtures *Fixtures
}

// ChildFunc runs in a fresh process started by RunChild and writes its
// result (one JSON document) to out.
type ChildFunc func(args []string, out io.Writer) error

// RegisterChild names a function that a section runs in a fresh process
// (so that, for example, peak RSS is not polluted by the parent's heap).
func RegisterChild(name string, f ChildFunc) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := children[name]; dup {
		panic("harness: duplicate child " + name)
	}
	children[name] = f
}

// LookupChild returns the child function registered under name.
func LookupChild(name string) (ChildFunc, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	f, ok := children[name]
	return f, ok
}
