package sections

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/buckets"
	"github.com/bucketlog/bucketlog/bench/internal/harness"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

func init() {
	harness.Register(harness.Section{
		Name:    "gc",
		Doc:     "one Log.GC pass removing the same 4 segments from a store holding 10k and 100k events: on the local disk, on an in-memory FS (CPU only), and shipping to in-process gofakes3",
		Default: true,
		Order:   42,
		Run:     runGC,
	})
}

// GC section sizes.
const (
	// gcSegmentBytes is small so that 10k events span dozens of segments
	// and 100k hundreds.
	gcSegmentBytes = 64 << 10
	// gcPassSegments is what every pass removes, whatever the history.
	gcPassSegments = 4
	gcConsumer     = "bench"
)

// gcHistories are the events the store holds before each pass.
var gcHistories = []int{10_000, 100_000}

func gcPasses(env *harness.Env) int {
	if env.Quick {
		return max(env.Reps, 7)
	}
	return max(env.Reps, 11)
}

// gcStore is one shard under GC: history events in the store before every
// pass, one consumer, the read index built (as on a shard that serves
// reads).
type gcStore struct {
	label   string
	history int
	l       *bucketlog.Log
	src     *eventSource
	c       *buckets.Counter // nil on the local disk
	cleanup []func()

	reps     []float64 // ms per pass
	held     []float64 // events in the store before each pass
	requests []float64 // bucket requests per pass
	listMs   []float64 // one listing of the shard's segment objects
	listed   int
	err      error
}

func (g *gcStore) close() {
	for i := len(g.cleanup) - 1; i >= 0; i-- {
		g.cleanup[i]()
	}
}

// gcMedium is where the measured shard lives.
type gcMedium struct {
	name string
	// mem puts the store on faultfs.MemFS: fsync is free, so a pass costs
	// its CPU and memory work only, and what grows with the history is not
	// hidden in the disk's fsync latency.
	mem bool
	// emu, when set, is the bucket the shard ships to.
	emu *buckets.Emulator
}

func openGCStore(ctx context.Context, env *harness.Env, m gcMedium, history int) (*gcStore, error) {
	g := &gcStore{history: history, src: newEventSource(BucketPayload, env.Executions)}
	opts := bucketlog.Options{SegmentMaxBytes: gcSegmentBytes, NoBackground: true, Logger: warnLogger()}
	if m.mem {
		fs := faultfs.NewMemFS()
		opts.Dir, opts.FS = "/gc", fs
		if err := fs.MkdirAll(opts.Dir, 0o755); err != nil {
			return nil, err
		}
	} else {
		dir, err := tempDir(env.WorkDir, "gc-")
		if err != nil {
			return nil, err
		}
		g.cleanup = append(g.cleanup, func() { os.RemoveAll(dir) })
		opts.Dir = dir
	}
	emu := m.emu
	var err error
	if emu != nil {
		name, err := emu.NewBucket("gc")
		if err != nil {
			g.close()
			return nil, err
		}
		b, err := emu.Open(ctx, name)
		if err != nil {
			g.close()
			return nil, err
		}
		g.cleanup = append(g.cleanup, func() { b.Close() })
		g.c = &buckets.Counter{}
		opts.Bucket = g.c.Wrap(b)
	}
	g.l, err = bucketlog.Open(ctx, opts)
	if err != nil {
		g.close()
		return nil, err
	}
	g.cleanup = append(g.cleanup, func() { g.l.Close() })
	if err := appendEvents(ctx, g.l, g.src, history); err != nil {
		g.close()
		return nil, err
	}
	// The consumer, and the read index a serving shard has built.
	if _, err := g.l.Pull(ctx, gcConsumer, 1); err != nil {
		g.close()
		return nil, err
	}
	if _, err := g.l.ReadExecution(ctx, g.src.ids[0], 0, 1); err != nil {
		g.close()
		return nil, err
	}
	if err := g.ship(ctx); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// ship makes every sealed segment durable in the bucket (a pass may only
// remove those); nothing on the local disk.
func (g *gcStore) ship(ctx context.Context) error {
	if g.c == nil {
		return nil
	}
	_, err := g.l.Ship(ctx, false)
	return err
}

// pass acks the consumer through the gcPassSegments-th segment, times one
// Log.GC, checks it removed exactly those segments (and, with a bucket,
// their objects), then appends as many events as it removed and ships
// them, so the next pass finds the same history. Only the GC call is timed.
func (g *gcStore) pass(ctx context.Context, timed bool) error {
	snap, err := g.l.Store().Snapshot()
	if err != nil {
		return err
	}
	if len(snap.Segments) < gcPassSegments+3 {
		return fmt.Errorf("only %d segments in the store", len(snap.Segments))
	}
	held := snap.Tip - snap.ReclaimedSeq
	boundary := snap.Segments[gcPassSegments-1].LastSeq
	if _, err := g.l.Ack(ctx, gcConsumer, boundary); err != nil {
		return err
	}
	var before buckets.Counts
	if g.c != nil {
		before = g.c.Snapshot()
	}
	t0 := time.Now()
	rep, err := g.l.GC(ctx, bucketlog.GCRequest{})
	d := time.Since(t0)
	if err != nil {
		return err
	}
	if n := len(rep.Local.Removed); n != gcPassSegments {
		return fmt.Errorf("the pass removed %d segments, want %d (%s)", n, gcPassSegments, rep.Plan.Reason)
	}
	if g.c != nil {
		if rep.Shared == nil || rep.Shared.Deleted.Segments != gcPassSegments {
			return fmt.Errorf("the pass deleted %+v from the bucket, want %d segment objects", rep.Shared, gcPassSegments)
		}
		if timed {
			g.requests = append(g.requests, float64(g.c.Snapshot().Sub(before).Requests))
		}
	}
	if timed {
		g.reps = append(g.reps, float64(d)/float64(time.Millisecond))
		g.held = append(g.held, float64(held))
		if g.c != nil {
			if err := g.timeList(ctx); err != nil {
				return err
			}
		}
	}
	if err := appendEvents(ctx, g.l, g.src, int(rep.Local.ThroughSeq-snap.ReclaimedSeq)); err != nil {
		return err
	}
	return g.ship(ctx)
}

func memNote(m gcMedium) string {
	if m.mem {
		return "faultfs.MemFS, fsync free: the pass's CPU and memory work only; "
	}
	return ""
}

// timeList times one listing of the shard's segment objects, which every
// shared pass makes (reclaim.DeleteThrough), to show what part of a pass
// grows with the history the bucket holds.
func (g *gcStore) timeList(ctx context.Context) error {
	t0 := time.Now()
	n := 0
	for _, err := range g.l.Bucket().List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			return err
		}
		n++
	}
	g.listMs = append(g.listMs, float64(time.Since(t0))/float64(time.Millisecond))
	g.listed = n
	return nil
}

func runGC(ctx context.Context, env *harness.Env) ([]harness.Row, error) {
	var rows []harness.Row
	for _, m := range []gcMedium{{name: "local disk"}, {name: "memory FS", mem: true}} {
		rows = append(rows, gcRows(ctx, env, m)...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	emu, err := buckets.StartS3()
	if err != nil {
		return append(rows, harness.Failed("gc", "gofakes3", "", err)), nil
	}
	defer emu.Close()
	rows = append(rows, gcRows(ctx, env, gcMedium{name: "local disk shipping to gofakes3", emu: emu})...)
	return rows, nil
}

// gcRows measures both histories on one medium. Passes alternate between
// the two stores.
func gcRows(ctx context.Context, env *harness.Env, m gcMedium) []harness.Row {
	const section = "gc"
	medium := m.name
	var stores []*gcStore
	for _, h := range gcHistories {
		t0 := time.Now()
		g, err := openGCStore(ctx, env, m, h)
		if err != nil {
			g = &gcStore{history: h, err: err}
		} else {
			env.Logf("gc: %s, history %s built in %v", medium, countLabel(h), time.Since(t0).Round(time.Millisecond))
		}
		g.label = fmt.Sprintf("%s, history %s/one pass removing %d segments", medium, countLabel(h), gcPassSegments)
		stores = append(stores, g)
	}
	defer func() {
		for _, g := range stores {
			if g.l != nil {
				g.close()
			}
		}
	}()
	// One untimed pass each first, so the timed ones all find a reclaim
	// manifest and a consumer already written forward once.
	for _, g := range stores {
		if g.err == nil {
			g.err = g.pass(ctx, false)
		}
	}
	for i := 0; i < gcPasses(env); i++ {
		// The order rotates, so neither history always goes first.
		for j := range stores {
			g := stores[(i+j)%len(stores)]
			if ctx.Err() != nil || g.err != nil {
				continue
			}
			if err := g.pass(ctx, true); err != nil {
				g.err = err
				env.Logf("gc %s: %v", g.label, err)
			}
		}
	}
	var rows []harness.Row
	for _, g := range stores {
		if g.err != nil {
			rows = append(rows, harness.Failed(section, g.label, "ms", g.err))
			continue
		}
		note := fmt.Sprintf("%sLog.GC: %.0f events held before each pass (median), %s segments of %d B payloads, 1 consumer acked through segment %d, read index built",
			memNote(m), harness.Median(g.held), sizeLabel(gcSegmentBytes), BucketPayload, gcPassSegments)
		if g.c != nil {
			note += fmt.Sprintf("; %.0f bucket requests per pass (median)", harness.Median(g.requests))
		}
		rows = append(rows, harness.Measured(section, g.label, "ms per pass", "ms", g.reps, note))
	}
	var lists []harness.Row
	for _, g := range stores {
		if g.err == nil && g.c != nil {
			lists = append(lists, harness.Measured(section, fmt.Sprintf("%s, history %s/one listing of the shard's segment objects", medium, countLabel(g.history)),
				"ms per listing", "ms", g.listMs, fmt.Sprintf("%d objects; a shared pass lists them all to delete %d (reclaim.DeleteThrough)", g.listed, gcPassSegments)))
		}
	}
	if len(rows) == 2 {
		rows = append(rows, harness.Ratio(section+"/ratio", fmt.Sprintf("%s, pass time history %s / %s", medium, countLabel(gcHistories[1]), countLabel(gcHistories[0])),
			rows[1], rows[0], "TARGET ≤ 1.3: a pass costs what it removes, not what the store holds"))
	}
	return append(rows, lists...)
}
