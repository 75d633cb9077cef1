package sections

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
)

func init() {
	harness.Register(harness.Section{
		Name:    "open",
		Doc:     "open-for-append time (trusted checkpoint: O(1)) at 1k and -events; open + read everything back at -events/10 and -events, bucketlog vs peers",
		Default: true,
		Order:   20,
		Run:     runOpen,
	})
}

// openReps is the repetition count of the open-for-append timing, which is
// short enough to take more samples than the configured minimum.
func openReps(env *harness.Env) int { return max(env.Reps, 5) }

func runOpen(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "open"
	var rows []harness.Row
	systems := targets.Systems()

	// Open for append. Every system gets the same stores; bucketlog's rows
	// say whether its open replayed (it must not with a trusted checkpoint).
	openSizes := []int{1000, env.Events}
	openRow := map[string]harness.Row{}
	for _, n := range openSizes {
		for _, sys := range systems {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			name := fmt.Sprintf("open-for-append/%s/%s", countLabel(n), sys.Name)
			dir, err := storeFixture(env, sys, n)
			if err != nil {
				rows = append(rows, harness.Failed(section, name, "ms", err))
				continue
			}
			var reps []float64
			notes := map[string]int{}
			var failed error
			for range openReps(env) {
				d, note, err := sys.OpenForAppend(dir)
				if err != nil {
					failed = err
					break
				}
				reps = append(reps, ms(d))
				if note != "" {
					notes[note]++
				}
			}
			var r harness.Row
			if failed != nil {
				r = harness.Failed(section, name, "ms", failed)
			} else {
				r = harness.Measured(section, name, "ms", "ms", reps, joinNotes(notes))
			}
			openRow[name] = r
			rows = append(rows, r)
		}
	}
	big, small := countLabel(env.Events), countLabel(1000)
	rows = append(rows, harness.Ratio(section+"/ratio",
		fmt.Sprintf("open-for-append bucketlog %s / %s", big, small),
		openRow["open-for-append/"+big+"/bucketlog"], openRow["open-for-append/"+small+"/bucketlog"],
		"O(1) open: expect about 1"))

	// Open and read everything back, repetitions outermost.
	replaySizes := []int{env.Events / 10, env.Events}
	type cell struct {
		reps []float64 // seconds
		err  error
	}
	cells := map[string]*cell{}
	var names []string
	for _, n := range replaySizes {
		for _, sys := range systems {
			name := fmt.Sprintf("replay/%s/%s", countLabel(n), sys.Name)
			cells[name] = &cell{}
			names = append(names, name)
		}
	}
	for rep := 0; rep < replayReps(env); rep++ {
		for _, n := range replaySizes {
			for _, sys := range systems {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				name := fmt.Sprintf("replay/%s/%s", countLabel(n), sys.Name)
				c := cells[name]
				if c.err != nil {
					continue
				}
				dir, err := storeFixture(env, sys, n)
				if err != nil {
					c.err = err
					continue
				}
				// The previous system's garbage is collected before the
				// clock starts, for every system alike, so no replay pays
				// for another's heap.
				runtime.GC()
				t0 := time.Now()
				got, err := sys.Replay(dir, StorePayload)
				d := time.Since(t0)
				if err == nil && got != uint64(n) {
					err = fmt.Errorf("read back %d records of %d", got, n)
				}
				if err != nil {
					c.err = err
					env.Logf("replay %s: %v", name, err)
					continue
				}
				c.reps = append(c.reps, ms(d))
				env.Logf("replay rep %d %s: %v (%.0f events/s)", rep+1, name, d.Round(time.Millisecond), float64(n)/d.Seconds())
			}
		}
	}
	replayRow := map[string]harness.Row{}
	for _, name := range names {
		c := cells[name]
		var r harness.Row
		if c.err != nil {
			r = harness.Failed(section, name, "ms", c.err)
		} else {
			n := 0
			for _, sz := range replaySizes {
				if strings.HasPrefix(name, "replay/"+countLabel(sz)+"/") {
					n = sz
				}
			}
			r = harness.Measured(section, name, "ms", "ms", c.reps, "")
			r.Note = fmt.Sprintf("%.0f events/s (warm page cache)", float64(n)/(r.Value/1000))
		}
		replayRow[name] = r
		rows = append(rows, r)
	}
	for _, n := range replaySizes {
		c := countLabel(n)
		for _, sys := range systems[1:] {
			rows = append(rows, harness.Ratio(section+"/ratio",
				fmt.Sprintf("replay/%s time bucketlog / %s", c, sys.Name),
				replayRow["replay/"+c+"/bucketlog"], replayRow["replay/"+c+"/"+sys.Name],
				"below 1: bucketlog is faster"))
		}
	}
	return rows, nil
}

// replayReps caps the replay repetitions at 3: one 1M-event replay of the
// slowest peer takes seconds, and three keep the section to about a minute.
func replayReps(env *harness.Env) int { return min(env.Reps, 3) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func joinNotes(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s (%d reps)", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
