package sections

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
)

func init() {
	harness.Register(harness.Section{
		Name:    "append",
		Doc:     "durable appends/s of bucketlog, tidwall/wal, raft-wal and the pwrite+fdatasync limits at each writer count and payload size",
		Default: true,
		Order:   10,
		Run:     runAppend,
	})
}

type appendKey struct {
	payload, writers int
	target           string
}

type appendCell struct {
	reps []float64
	// perFsync and fsyncMicros are the target's own figures per rep, when
	// it reports fsyncs.
	perFsync, fsyncMicros []float64
	sealsPerSec           []float64
	full                  int
	err                   error
	label                 string
}

func appendName(payload, writers int, target string) string {
	return fmt.Sprintf("%s/w=%d/%s", sizeLabel(payload), writers, target)
}

func runAppend(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	const section = "append"
	all := targets.Targets()
	cells := map[appendKey]*appendCell{}
	var order []appendKey
	for _, size := range env.Payloads {
		for _, w := range env.Writers {
			for _, t := range all {
				if (t.Limit && w != 1) || (t.Batching && w == 1) {
					continue
				}
				k := appendKey{size, w, t.Name}
				cells[k] = &appendCell{label: appendName(size, w, t.Name)}
				order = append(order, k)
			}
		}
	}
	payloads := map[int]*targets.Payload{}
	for _, size := range env.Payloads {
		p := targets.MakePayload(size)
		payloads[size] = &p
	}
	byName := map[string]targets.Target{}
	for _, t := range all {
		byName[t.Name] = t
	}
	// Repetitions are the outer loop so that a slow minute of the machine
	// touches every target once instead of all repetitions of one.
	for rep := 0; rep < env.Reps; rep++ {
		for _, k := range order {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			c := cells[k]
			if c.err != nil {
				continue
			}
			res, err := appendOnce(ctx, env, byName[k.target], k.writers, payloads[k.payload])
			if err != nil {
				c.err = err
				env.Logf("append %s: %v", c.label, err)
				continue
			}
			if res.Full {
				c.full++
			}
			c.reps = append(c.reps, res.PerSecond())
			if res.Fsyncs > 0 {
				c.perFsync = append(c.perFsync, res.AppendsPerFsync())
				c.fsyncMicros = append(c.fsyncMicros, float64(res.FsyncTime.Microseconds())/float64(res.Fsyncs))
				c.sealsPerSec = append(c.sealsPerSec, float64(res.Seals)/res.Elapsed.Seconds())
			}
			env.Logf("append rep %d %s: %.0f/s", rep+1, c.label, res.PerSecond())
		}
	}

	rows := make([]harness.Row, 0, len(order)*2)
	rowOf := map[appendKey]harness.Row{}
	for _, k := range order {
		c := cells[k]
		var r harness.Row
		if c.err != nil {
			r = harness.Failed(section, c.label, "appends/s", c.err)
		} else {
			var notes []string
			if len(c.perFsync) > 0 {
				notes = append(notes, fmt.Sprintf("%.1f appends/fsync, fsync %.0f µs, %.1f segment seals/s (medians, from its Observer)",
					harness.Median(c.perFsync), harness.Median(c.fsyncMicros), harness.Median(c.sealsPerSec)))
			}
			if c.full > 0 {
				notes = append(notes, fmt.Sprintf("file filled before the duration in %d reps (rate over the time until then)", c.full))
			}
			note := strings.Join(notes, "; ")
			r = harness.Measured(section, c.label, "appends/s", "appends/s", c.reps, note)
		}
		rowOf[k] = r
		rows = append(rows, r)
	}

	ratio := func(name string, num, den appendKey, note string) {
		a, ok1 := rowOf[num]
		b, ok2 := rowOf[den]
		if ok1 && ok2 {
			rows = append(rows, harness.Ratio(section+"/ratio", name, a, b, note))
		}
	}
	for _, size := range env.Payloads {
		s := sizeLabel(size)
		bl1 := appendKey{size, 1, "bucketlog"}
		ratio(s+"/bucketlog w=1 / limit/plain", bl1, appendKey{size, 1, "limit/plain"}, "")
		ratio(s+"/bucketlog w=1 / limit/fallocate", bl1, appendKey{size, 1, "limit/fallocate"}, "")
		ratio(s+"/bucketlog w=1 / limit/zerofill", bl1, appendKey{size, 1, "limit/zerofill"}, "")
		ratio(s+"/limit/fallocate / limit/plain", appendKey{size, 1, "limit/fallocate"}, appendKey{size, 1, "limit/plain"}, "what preallocation buys on this disk")
		ratio(s+"/limit/zerofill / limit/plain", appendKey{size, 1, "limit/zerofill"}, appendKey{size, 1, "limit/plain"}, "what preallocation buys on this disk")
		if len(env.Writers) > 1 {
			maxW := env.Writers[len(env.Writers)-1]
			ratio(fmt.Sprintf("%s/bucketlog w=%d / w=1", s, maxW), appendKey{size, maxW, "bucketlog"}, bl1, "group commit scaling")
		}
		for _, w := range env.Writers {
			for _, t := range all {
				if t.Limit || t.Name == "bucketlog" || (t.Batching && w == 1) {
					continue
				}
				ratio(fmt.Sprintf("%s/w=%d/bucketlog / %s", s, w, t.Name), appendKey{size, w, "bucketlog"}, appendKey{size, w, t.Name}, "")
			}
		}
	}
	return rows, nil
}

func appendOnce(ctx context.Context, env *harness.Env, t targets.Target, writers int, p *targets.Payload) (targets.DriveResult, error) {
	dir, err := tempDir(env.WorkDir, "append-"+strings.ReplaceAll(t.Name, "/", "_")+"-")
	if err != nil {
		return targets.DriveResult{}, err
	}
	defer os.RemoveAll(dir)
	a, err := t.Open(dir, p)
	if err != nil {
		return targets.DriveResult{}, fmt.Errorf("open: %w", err)
	}
	res, err := targets.Drive(ctx, a, writers, env.Duration, p)
	if cerr := a.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return res, err
}
