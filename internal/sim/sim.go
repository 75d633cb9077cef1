// Package sim is a deterministic, seeded simulation of the whole engine in
// the spirit of FoundationDB's simulation testing and TigerBeetle's VOPR.
// One seed gives one schedule of operations against the public API of
// bucketlog — appends (single and batch; the run is asynchronous or
// synchronous), pulls, acks, consumer deletes, seals, shipping ticks, GC
// passes (consumer interest and keep-last-N), restarts with the disk kept,
// crashed (a faultfs crash clone, torn or not), lost (hydrated), replaced
// by an older copy or missing its newest segment, restores and verifies —
// interleaved with bucket faults (every faultbucket kind, objects damaged
// at rest, a forged watermark) and disk faults (ENOSPC, EIO at the k-th
// write). The Log is opened with NoBackground and the simulation drives
// Ship and GC as steps; the clock is simulated (Options.Now) and the
// bucket is blobtier/memcas, which has compare-and-swap.
//
// An oracle (model.go) checks after every step what the issue lists; a
// run ends at its first violation with the seed and the schedule so far.
// Run it with `go test ./internal/sim` (200 seeds, which must be clean),
// `make sim SEEDS=N [START=S] [SIMFLAGS=...]`, or the flags -sim.seeds,
// -sim.start, -sim.seed=S (replay one seed), -sim.v (print schedules),
// -sim.steps, -sim.keepgoing, -sim.parallel=N (N seeds at once, each on
// its own world: the output and every seed's schedule are the same as
// with 1), -sim.known=1,4 (suppress the generator
// features and checks tied to those findings of issue 12; 15 is the
// damaged tail upload the simulation found) and -sim.classify (for each
// failing seed, which single suppression makes it pass).
//
// Every odd seed adds a second owner of the shard (writers.go): takeovers
// between and inside the owner's requests, the superseded owner paused,
// resumed and restarted, with the fencing oracle; -sim.writers gives every
// seed one, -sim.onewriter none, and -sim.nofence runs every writer
// unfenced (the RED control, TestSimNoFenceREDControl: the oracle must
// fail it).
//
// Engine waits the simulation cannot remove (watermark.Read's pause on a
// damaged watermark, tailbatch's jitter between lost compare-and-swap
// races) are short and rare.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Config is one run's shape.
type Config struct {
	Steps int
	// Known lists finding numbers (issue 12) whose generator features or
	// oracle checks are switched off while their fixes are not merged.
	Known map[int]bool
	Dir   string // a private real directory (see world.mirror)
	// Writers adds the second owner of the shard (writers.go); NoFence
	// runs every writer unfenced (the RED control).
	Writers, NoFence bool
}

// Stats counts what runs covered.
type Stats struct {
	Steps    map[string]int
	Restarts map[string]int
	Faults   map[string]int
	Restores int
	Refused  int
}

func NewStats() *Stats {
	return &Stats{Steps: map[string]int{}, Restarts: map[string]int{}, Faults: map[string]int{}}
}

func (s *Stats) String() string {
	var b strings.Builder
	line := func(title string, m map[string]int) {
		fmt.Fprintf(&b, "%s:", title)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(&b, " %s=%d", k, m[k])
		}
		b.WriteByte('\n')
	}
	line("steps", s.Steps)
	line("restarts", s.Restarts)
	line("faults", s.Faults)
	fmt.Fprintf(&b, "restores: %d, refused opens: %d\n", s.Restores, s.Refused)
	return b.String()
}

// Result is one run's outcome.
type Result struct {
	Seed      uint64
	Violation *violation // nil: clean
	Step      int
	Log       string // the schedule, one line per step
}

func (r Result) Failed() bool { return r.Violation != nil }

type run struct {
	cfg     Config
	seed    uint64
	rng     *rand.Rand
	w       *world
	m       *model
	step    int
	known   map[int]bool
	stats   *Stats
	log     strings.Builder
	pulled  map[string]uint64
	undeliv map[string]bool   // deleted consumers not yet covered by a whole Ship pass
	damaged map[string]string // key → the damaged bytes left at rest
	// localDamaged: local sealed segments opDamageLocal flipped a byte of (heal.go)
	localDamaged map[uint64]bool
	// mustRepair: damaged segment objects a restart must repair (key →
	// w.opens at the restart; see noteMustRepair).
	mustRepair map[string]int
	hiddenOpen int                      // the last Log (w.opens) whose open saw a tail listing hide objects (directed.go)
	ruleOf     map[int]faultbucket.Rule // faultbucket rule id → the rule
	burst      bool                     // appends carry big payloads
	// unrecoverable: the disk was lost with data damaged at rest; the run
	// ends at the next step (nothing can be required of it).
	unrecoverable bool
	readLife      int         // the Log (w.opens) the last check read
	wmDamaged     bool        // the watermark object was damaged since its last good read
	wmFired       map[int]int // faultbucket rule id → its firings already noted by noteWatermarkWriteDamage
	readThrough   uint64      // and the last sequence it read
	// The cursor object's value lost (damaged at rest or by a put, or read
	// damaged by the last check) while a listing hid objects: see
	// cursorLostUnderHiddenList.
	curLost   bool
	curNoted  string      // the cursor object's damaged bytes at rest already noted
	curFired  map[int]int // damaging write rules on the cursor object: firings noted
	hideFired map[int]int // hide-on-list rules: firings noted
	// lineage names the disk's history (see forkedCopy); savedLine is
	// the lineage of each of w.saved.
	lineage, lineages int
	savedLine         []int
	// The second writer (writers.go): its own random stream and state.
	wr *rand.Rand
	ws *writerState
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(&r.log, "%04d ", r.step)
	fmt.Fprintf(&r.log, format, args...)
	r.log.WriteByte('\n')
}

// Run runs one seed.
func Run(seed uint64, cfg Config, stats *Stats) Result {
	rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))
	r := &run{cfg: cfg, seed: seed, rng: rng, m: newModel(), known: cfg.Known, stats: stats,
		pulled: map[string]uint64{}, wmFired: map[int]int{}, undeliv: map[string]bool{}, damaged: map[string]string{}, localDamaged: map[uint64]bool{}, mustRepair: map[string]int{}, ruleOf: map[int]faultbucket.Rule{}}
	if r.known == nil {
		r.known = map[int]bool{}
	}
	r.w = newWorld(cfg.Dir, seed, rng.IntN(3) == 0)
	defer r.w.close()
	r.w.nofence = cfg.NoFence
	if cfg.Writers {
		r.wr = rand.New(rand.NewPCG(seed^0x5ec0d, seed*0x2545f4914f6cdd1d+7))
		r.writerInit()
		defer r.closeZombie()
	}
	r.logf("seed %d sync=%v steps=%d", seed, r.w.sync, cfg.Steps)
	v := r.loop(simCtx())
	return Result{Seed: seed, Violation: v, Step: r.step, Log: r.log.String()}
}

type op struct {
	name   string
	weight int
	faulty bool // a fault: only in the faulty part of the run
	run    func(r *run, ctx context.Context) *violation
}

var ops = []op{
	{"append", 24, false, func(r *run, ctx context.Context) *violation { return r.opAppend(ctx) }},
	{"batch", 10, false, func(r *run, ctx context.Context) *violation { return r.opBatch(ctx) }},
	{"pull", 8, false, func(r *run, ctx context.Context) *violation { return r.opPull() }},
	{"ack", 8, false, func(r *run, ctx context.Context) *violation { return r.opAck() }},
	{"delete-consumer", 2, false, func(r *run, ctx context.Context) *violation { return r.opDelete() }},
	{"tick", 14, false, func(r *run, ctx context.Context) *violation { return r.opShip(ctx, false) }},
	{"seal", 4, false, func(r *run, ctx context.Context) *violation { return r.opShip(ctx, true) }},
	{"gc", 6, false, func(r *run, ctx context.Context) *violation { return r.opGC(ctx) }},
	{"restart-keep", 3, false, func(r *run, ctx context.Context) *violation { return r.opRestartKeep(ctx) }},
	{"restart-crash", 3, false, func(r *run, ctx context.Context) *violation { return r.opCrash(ctx) }},
	{"restart-crash-mid-op", 2, false, func(r *run, ctx context.Context) *violation { return r.opCrashMid(ctx) }},
	{"restart-lost", 1, false, func(r *run, ctx context.Context) *violation { return r.opLost(ctx) }},
	{"restart-older", 1, false, func(r *run, ctx context.Context) *violation { return r.opOlder(ctx) }},
	{"save-copy", 2, false, func(r *run, ctx context.Context) *violation { return r.opSave() }},
	{"restore", 2, false, func(r *run, ctx context.Context) *violation { return r.opRestore(ctx, false) }},
	{"verify", 1, false, func(r *run, ctx context.Context) *violation { return r.opVerify(ctx) }},
	{"fault-bucket", 8, true, func(r *run, ctx context.Context) *violation { return r.opBucketFault() }},
	{"fault-upload-stall", 2, true, func(r *run, ctx context.Context) *violation { return r.opUploadStall() }},
	{"fault-disk", 2, true, func(r *run, ctx context.Context) *violation { return r.opDiskFault() }},
	{"damage-at-rest", 2, true, func(r *run, ctx context.Context) *violation { return r.opDamage() }},
	{"damage-local", 2, true, func(r *run, ctx context.Context) *violation { return r.opDamageLocal() }},
	{"damage-index", 2, true, func(r *run, ctx context.Context) *violation { return r.opDamageIndex(ctx) }},
	{"heal", 3, true, func(r *run, ctx context.Context) *violation { r.heal(); r.logf("heal"); return nil }},
	{"lose-segment", 1, true, func(r *run, ctx context.Context) *violation { return r.opLoseSegment(ctx) }},
	{"fault-damaged-put", 1, true, func(r *run, ctx context.Context) *violation { return r.opDamagedPut(ctx) }},
}

// needsLog: these ops run on an open Log.
var needsLog = map[string]bool{"append": true, "batch": true, "pull": true, "ack": true, "delete-consumer": true,
	"tick": true, "seal": true, "gc": true, "restart-keep": true, "restart-crash-mid-op": true, "restart-older": true, "lose-segment": true,
	"fault-damaged-put": true, "damage-local": true}

func (r *run) pick(faulty bool) op {
	total := 0
	for _, o := range ops {
		if o.faulty && !faulty || r.skipOp(o.name) {
			continue
		}
		total += o.weight
	}
	n := r.rng.IntN(total)
	for _, o := range ops {
		if o.faulty && !faulty || r.skipOp(o.name) {
			continue
		}
		if n < o.weight {
			return o
		}
		n -= o.weight
	}
	panic("unreachable")
}

func (r *run) skipOp(name string) bool {
	switch name {
	case "fault-disk":
		return r.known[3]
	case "lose-segment":
		return r.known[9]
	}
	return false
}

func (r *run) loop(ctx context.Context) *violation {
	if v, _ := r.reopen(ctx, "first"); v != nil {
		return v
	}
	faultyUntil := r.cfg.Steps * 3 / 4
	for r.step = 1; r.step <= r.cfg.Steps; r.step++ {
		for id, until := range r.w.rules {
			if until <= r.step {
				r.w.fb.Remove(id)
				delete(r.w.rules, id)
			}
		}
		if r.step == faultyUntil {
			r.heal()
		}
		if r.w.log == nil {
			r.stats.Steps["reopen"]++
			v, err := r.reopen(ctx, "retry")
			if v != nil {
				return v
			}
			if err != nil && r.step > faultyUntil+3 {
				return fail("wedge-open", "the shard cannot open %d steps after the faults stopped: %v", r.step-faultyUntil, err)
			}
		} else if v, ok := r.writerStep(ctx); ok {
			if v != nil {
				return v
			}
		} else {
			o := r.pick(r.step < faultyUntil)
			r.stats.Steps[o.name]++
			if !needsLog[o.name] || r.w.log != nil {
				if v := o.run(r, ctx); v != nil {
					return v
				}
			}
		}
		if r.w.inj.takeFired() {
			r.stats.Faults["disk-fired"]++
			r.logf("  (the disk fault fired)")
		}
		if v := r.check(ctx); v != nil {
			return v
		}
		if r.unrecoverable {
			r.logf("end: unrecoverable")
			return nil
		}
	}
	if r.rng.IntN(40) == 0 && !r.known[11] {
		r.heal()
		return r.opForge(ctx)
	}
	if v := r.calm(ctx); v != nil {
		return v
	}
	if v := r.checkWritersEnd(ctx); v != nil || r.seed%4 != 0 {
		return v
	}
	return r.forgeZombie(ctx) // a quarter of the seeds, by seed: no draw
}

// check runs the per-step oracle.
func (r *run) check(ctx context.Context) *violation {
	if r.w.log != nil {
		// A Log already read is read on from where the last check ended,
		// except now and then in full.
		from := r.readThrough
		if r.readLife != r.w.opens || r.step%16 == 0 {
			from = 0
		}
		got, err := readLogFrom(r.w.log, from)
		if err != nil {
			if errors.Is(err, localseg.ErrPoisoned) || r.remoteReadExcused(err) || r.localDamageExcused(err) {
				return nil
			}
			return fail("read", "scan the open log: %v", err)
		}
		if v := r.m.checkLocalFrom(got, from, !r.known[3]); v != nil {
			return v
		}
		r.noteHealed()
		r.readLife, r.readThrough = r.w.opens, from
		if n := len(got.records); n > 0 {
			r.readThrough = got.records[n-1].Seq
		}
		for name := range got.consumers {
			if !r.m.deleted[name] {
				r.m.live[name] = true
			}
		}
		for name := range r.m.live {
			if _, ok := got.consumers[name]; !ok {
				delete(r.m.live, name)
			}
		}
	}
	clean := r.w.clean()
	r.noteWatermarkWriteDamage()
	if data, _, err := clean.Get(ctx, blobtier.WatermarkKey(0)); err == nil {
		if m, err := watermark.Decode(data); err == nil {
			if m.Seq < r.m.wm && !r.known[7] {
				if v := r.repairedLower(ctx, clean, m); v != nil {
					return v
				}
				r.m.wm = m.Seq
			}
			r.m.wm = max(r.m.wm, m.Seq)
			// durable_seq never moves backward; a damaged rw's value is
			// lost, and its owner's repair may then write it lower.
			if d := m.Durable(); d < r.m.durable && !r.wmDamaged {
				return fail("durable-seq-backward", "rw's durable_seq moved from %d to %d", r.m.durable, d)
			} else if d < r.m.durable {
				r.logf("  (the damaged watermark was repaired with durable_seq %d, below %d)", d, r.m.durable)
				r.m.durable = d
			}
			r.m.durable = max(r.m.durable, m.Durable())
			r.wmDamaged = false
		} else {
			r.wmDamaged = true
		}
	} else if errors.Is(err, blobtier.ErrCorrupt) {
		r.wmDamaged = true
	}
	excused := r.cursorLostUnderHiddenList()
	// Also when a data object damaged at rest is outstanding: its owner
	// deleted it to put it again (its tail copies were cleaned up), so
	// until that put the bucket lacks its events; a restore may then
	// rightly refuse (damageOutstanding), and a cursor object whose value
	// was lost is rebuilt from what the bucket holds, which may be less.
	excused = excused || r.curLost && r.damageOutstanding(true)
	if data, _, err := clean.Get(ctx, blobtier.CursorKey(0)); err == nil {
		if c, err := tailbatch.DecodeCursor(data); err == nil {
			if c.ShippedThrough < r.m.cur && !excused {
				return fail("shipped-through-backward", "the cursor object's shipped_through moved from %d to %d", r.m.cur, c.ShippedThrough)
			}
			if c.ShippedThrough < r.m.cur {
				r.logf("  (the cursor object was damaged and rebuilt from a listing that hid objects or a bucket missing a damaged object: shipped_through %d -> %d excused)", r.m.cur, c.ShippedThrough)
			}
			r.m.cur, r.curLost = c.ShippedThrough, false
		} else {
			r.curLost = true
		}
	} else if errors.Is(err, blobtier.ErrCorrupt) {
		r.curLost = true
	}
	return nil
}

// calm ends a run with the faults gone: the shard must be ready and
// shipping within a bounded number of ticks, also after a GC pass, and the
// bucket must restore everything it was reported to hold.
func (r *run) calm(ctx context.Context) *violation {
	r.heal()
	r.logf("calm")
	if r.w.log != nil {
		if ok, _ := r.w.log.Health(); !ok {
			if v := r.opRestartKeep(ctx); v != nil {
				return v
			}
		}
	}
	for i := 0; r.w.log == nil && i < 3; i++ {
		if v, _ := r.reopen(ctx, "calm"); v != nil {
			return v
		}
	}
	if r.w.log == nil {
		return fail("wedge-open", "the shard cannot open with the faults gone")
	}
	for round := range 2 {
		caught := false
		for range 6 {
			r.w.advance(20e9)
			rep, err := r.w.log.Ship(ctx, true)
			r.noteShipped(err)
			if v := r.checkRepaired(err); v != nil {
				return v
			}
			ok, why := r.w.log.Health()
			r.logf("calm ship -> shipped %d tip %d ready=%v %s", rep.ShippedThrough, rep.Tip, ok, errClass(err))
			if err == nil && ok && r.w.log.ShippedThrough() == r.w.log.Store().Tip() {
				caught = true
				break
			}
			_ = why
		}
		if !caught && !r.known[4] {
			return fail("wedge-ship", "round %d: not shipping 6 ticks after the faults stopped: shipped %d, tip %d", round, r.w.log.ShippedThrough(), r.w.log.Store().Tip())
		}
		if round == 0 {
			rep, err := r.w.log.GC(ctx, bucketlog.GCRequest{MinRetainedSegments: 2, MaxRetainedSegments: 2})
			r.logf("calm gc -> %s base %d %s", rep.Outcome, rep.Base, errClass(err))
		}
	}
	if v := r.check(ctx); v != nil {
		return v
	}
	return r.opRestore(ctx, true)
}

// errClass names an error by its class, so the schedule is the same on
// every run of a seed whatever the messages hold.
func errClass(err error) string {
	if err == nil {
		return "ok"
	}
	for _, c := range []struct {
		err  error
		name string
	}{
		{bucketlog.ErrFenced, "fenced"}, {bucketlog.ErrNotInBucket, "not_in_bucket"}, {bucketlog.ErrStaleDisk, "stale_disk"}, {bucketlog.ErrDiverged, "diverged"},
		{bucketlog.ErrSecondWriter, "second_writer"}, {bucketlog.ErrUsage, "usage"}, {bucketlog.ErrInvalidState, "invalid_state"},
		{localseg.ErrPoisoned, "poisoned"}, {localseg.ErrCorrupt, "corrupt_local"}, {blobtier.ErrCorrupt, "corrupt_object"},
		{blobtier.ErrConflict, "conflict"}, {localseg.ErrInvalidState, "invalid_state_local"},
	} {
		if errors.Is(err, c.err) {
			return "err=" + c.name
		}
	}
	return "err=other"
}

func short(s string) string {
	if i := strings.IndexByte(s, '='); i >= 0 {
		return s[:i] + "+pad"
	}
	return s
}

// simCtx is the context of every call the simulation makes: the engine's
// waits between retries and polls (blobtier.Wait) return at once, so a
// seed's run costs CPU, not wall-clock pauses (the schedule is the seed's,
// not the timers').
func simCtx() context.Context {
	return blobtier.WithWait(context.Background(), func(ctx context.Context, _ time.Duration) error { return ctx.Err() })
}
