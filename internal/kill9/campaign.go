package kill9

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// Scenario is one workload and crash plan.
type Scenario struct {
	Name string
	// Bucket ships to a gofakes3 bucket in the parent; Sync makes appends
	// wait for it.
	Bucket, Sync bool
	// GC runs periodic reclaim every GCInterval, with keep-last-N when
	// MaxRetained > 0.
	GC          bool
	GCInterval  time.Duration
	MaxRetained int
	Writers     int
	BatchEvery  int
	WriterPause time.Duration
	// SegmentMaxBytes small means a rollover every few hundred events.
	SegmentMaxBytes int64
	SealMaxAge      time.Duration
	TailInterval    time.Duration
	SyncWait        time.Duration
	// PutDelay holds each PUT of a child up to this long (a slow bucket).
	PutDelay time.Duration
	// Plan says, kill after kill (cycling), what happens to the shard
	// directory after the check: 'S' restart the child on it; 'R' delete
	// it, restore it with bucketlog.Restore, check the restored store,
	// restart on it; 'H' delete it and let the next child's Open hydrate
	// it from the bucket (that child's kill may land mid-hydration). Only
	// bucket scenarios use it; the others always restart ('S').
	Plan string
	// EpochKills bounds one store lineage: after this many kills the next
	// kills start over on a fresh directory and bucket, so each check
	// reads a store of bounded size.
	EpochKills int
	// MaxDelay is the longest kill delay after the child is ready.
	MaxDelay time.Duration
}

// Config is how Run drives a scenario.
type Config struct {
	// Exe is the binary that runs RunChild when ChildEnv is set (the test
	// binary itself).
	Exe string
	// Root holds the scenario's directories.
	Root  string
	Kills int
	Seed  uint64
	// ChildTimeout is the hang guard on one child (ready, exit after the
	// kill) and on draining its bucket requests (default 60 s).
	ChildTimeout time.Duration
	// Logf receives progress and every failure's evidence (nil: none).
	Logf func(format string, args ...any)
	// Verbose logs every kill.
	Verbose bool
}

// Result is what a scenario's campaign found.
type Result struct {
	Scenario string  `json:"scenario"`
	Seed     uint64  `json:"seed"`
	Kills    int     `json:"kills"`
	Seconds  float64 `json:"seconds"`
	// KillsBeforeReady landed while the child was starting: opening,
	// recovering, reconciling with the bucket.
	KillsBeforeReady int `json:"kills_before_ready"`
	// TornTailOpens counts opens that repaired a torn tail (a kill landed
	// inside a write).
	TornTailOpens int `json:"torn_tail_opens"`
	Restores      int `json:"restores"`
	// Hydrations counts children whose Open hydrated an empty directory
	// from the bucket and were then checked; HydrationsKilled counts kills
	// that landed before the hydration finished (then restored by hand).
	Hydrations       int `json:"hydrations"`
	HydrationsKilled int `json:"hydrations_killed"`
	Epochs           int `json:"epochs"`
	// Segments counts segment files created (rollovers + 1 per epoch);
	// BaseAdvances counts checks that found GC had moved the base;
	// ShipReports counts rises of ShippedThrough the children reported.
	Segments     int `json:"segments"`
	BaseAdvances int `json:"base_advances"`
	ShipReports  int `json:"ship_reports"`
	// AckedEvents counts acknowledgements reported; AckedChecks counts
	// acknowledged events found intact, summed over every check.
	AckedEvents   int `json:"acked_events"`
	PendingEvents int `json:"not_in_bucket_events"`
	AckedChecks   int `json:"acked_checks"`
	Lost          int `json:"lost"`
	Duplicates    int `json:"duplicates"`
	Corrupt       int `json:"corrupt"`
	// WindowLoss counts events that may be lost and were: asynchronous
	// acknowledgements after the last ShippedThrough, at a restore.
	WindowLoss int `json:"window_loss"`
	Reclaimed  int `json:"reclaimed_at_check"`
	// MaxTip is the largest tip any check saw.
	MaxTip   uint64   `json:"max_tip"`
	Failures []string `json:"failures"`
}

func (r *Result) failf(format string, args ...any) {
	if len(r.Failures) < 200 {
		r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
	}
}

// OK reports whether the campaign found no loss and no failure.
func (r *Result) OK() bool {
	return r.Lost == 0 && r.Duplicates == 0 && r.Corrupt == 0 && len(r.Failures) == 0
}

func (r *Result) add(vd Verdict, v *View) {
	r.AckedChecks += vd.Checked
	r.Lost += len(vd.Lost)
	r.Duplicates += vd.Duplicates
	r.Corrupt += vd.Corrupt
	r.Reclaimed += vd.Reclaimed
	r.MaxTip = max(r.MaxTip, v.Tip)
	if vd.Mode.restored() {
		r.WindowLoss += len(vd.Window)
	}
}

// Run runs sc until cfg.Kills kills, checking after each. It returns an
// error only when the harness itself cannot go on; what the engine did
// wrong is in the Result (and stops the campaign early when continuing
// would check nothing more).
func Run(ctx context.Context, cfg Config, sc Scenario) (res Result, err error) {
	if cfg.ChildTimeout <= 0 {
		cfg.ChildTimeout = 60 * time.Second
	}
	if sc.EpochKills <= 0 {
		sc.EpochKills = cfg.Kills
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	start := time.Now()
	res = Result{Scenario: sc.Name, Seed: cfg.Seed, Failures: []string{}}
	defer func() { res.Seconds = math.Round(time.Since(start).Seconds()*10) / 10 }()
	h := fnv.New64a()
	h.Write([]byte(sc.Name))
	rng := rand.New(rand.NewPCG(cfg.Seed, h.Sum64()))

	var s3 *fakeS3
	if sc.Bucket {
		if s3, err = startFakeS3(); err != nil {
			return res, err
		}
		defer func() {
			if cerr := s3.close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	plan := sc.Plan
	if plan == "" || s3 == nil {
		plan = "S"
	}
	restoreMode := ModeRestoreAsync
	if sc.Sync {
		restoreMode = ModeRestoreSync
	}
	run := 0
	for epoch := 0; res.Kills < cfg.Kills; epoch++ {
		res.Epochs++
		root := filepath.Join(cfg.Root, fmt.Sprintf("%s-%d", sc.Name, epoch))
		if err := os.MkdirAll(root, 0o755); err != nil {
			return res, err
		}
		bucket := fmt.Sprintf("kill9-%d", epoch)
		if s3 != nil {
			if err := s3.createBucket(bucket); err != nil {
				return res, err
			}
		}
		shardDir := localseg.ShardDir(root, 0)
		m := NewModel()
		ep := epochState{res: &res, m: m, shardDir: shardDir, logf: logf}
		hydrating := false // this child's Open hydrates an empty directory
		for k := 0; k < sc.EpochKills && res.Kills < cfg.Kills; k++ {
			run++
			if hydrating {
				m.HydratedRun, m.HydratedShipped = run, m.Shipped
			}
			inc := incarnation{cfg: cfg, sc: sc, root: root, bucket: bucket, run: run, s3: s3}
			t0 := time.Now()
			kill, err := inc.live(ctx, rng, m)
			if err != nil {
				return res, err
			}
			lived := time.Since(t0)
			res.Kills++
			if kill.beforeReady {
				res.KillsBeforeReady++
			}
			where := fmt.Sprintf("scenario %s seed %d run %d (kill %s after %s)", sc.Name, cfg.Seed, run, kill.delay.Round(10*time.Microsecond), kill.from())
			t1 := time.Now()
			ok := true
			for _, f := range m.Failures {
				res.failf("%s: child reported %s", where, f)
				ok = false
			}
			m.Failures = m.Failures[:0]
			if kill.exitErr != nil {
				res.failf("%s: %v", where, kill.exitErr)
				ok = false
			}

			action := plan[k%len(plan)]
			if hydrating {
				// What the child found is what the bucket held (the
				// restore promise) plus what it acknowledged itself (the
				// local promise).
				v, verr := ReadView(shardDir)
				switch {
				case verr == nil && v.Tip == 0 && v.Base == 1 && !m.ackedBy(run) && len(m.Superseded) == 0:
					// The kill landed before the hydration finished: the
					// directory holds no store. Restore it by hand (over
					// whatever the killed hydration left beside it).
					res.HydrationsKilled++
					m.HydratedRun, m.HydratedShipped = 0, 0
					action = 'R'
				default:
					res.Hydrations++
					ok = ep.check(v, verr, restoreMode, where+" after hydrating") && ok
				}
			} else {
				v, verr := ReadView(shardDir)
				ok = ep.check(v, verr, ModeLocal, where) && ok
			}
			hydrating = false
			if ok {
				switch action {
				case 'R':
					res.Restores++
					if err := os.RemoveAll(shardDir); err != nil {
						return res, err
					}
					if _, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{BucketURL: s3.parent.URL(bucket), Dir: root, AllowEmpty: true}); err != nil {
						res.failf("%s: restore from the bucket: %v", where, err)
						ok = false
						break
					}
					v, verr := ReadView(shardDir)
					ok = ep.check(v, verr, restoreMode, where+" after restore")
				case 'H':
					// Lose the disk; the next child's Open hydrates.
					if err := os.RemoveAll(shardDir); err != nil {
						return res, err
					}
					hydrating = true
				}
			}
			if cfg.Verbose {
				logf("%s: next %c; %d acked so far, shipped through %d; child %s, checks %s", where, action, m.AckLines, m.Shipped,
					lived.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
			}
			if !ok {
				logf("%s: stopping the campaign at the first failure; the store is kept in %s", where, root)
				ep.done()
				return res, nil
			}
		}
		ep.done()
		logf("%s: epoch %d done: %d kills so far, %d acked events, %d checks, tip %d, %d restores, %d hydrations", sc.Name, epoch, res.Kills, res.AckedEvents, res.AckedChecks, res.MaxTip, res.Restores, res.Hydrations)
		if err := os.RemoveAll(root); err != nil {
			return res, err
		}
	}
	return res, nil
}

// epochState carries one store lineage's statistics into the Result.
type epochState struct {
	res      *Result
	m        *Model
	shardDir string
	logf     func(string, ...any)
	// lastReclaimed is the reclaim base the previous check found.
	lastReclaimed uint64
	highest       uint64
}

func (e *epochState) done() {
	r := e.res
	r.AckedEvents += e.m.AckLines
	r.PendingEvents += e.m.PendingLines
	r.TornTailOpens += e.m.TornOpens
	r.ShipReports += e.m.ShipLines
	r.Segments += int(e.highest)
}

// check holds a view of the shard directory to the model; it returns
// false when something is wrong.
func (e *epochState) check(v *View, verr error, mode Mode, where string) bool {
	res, m := e.res, e.m
	if verr != nil {
		res.Corrupt++
		res.failf("%s: %s check: %v", where, mode, verr)
		return false
	}
	if v.Base-1 > e.lastReclaimed {
		res.BaseAdvances++
	}
	e.lastReclaimed = v.Base - 1
	e.highest = max(e.highest, v.HighestSegment)
	vd := Check(m, v, mode)
	res.add(vd, v)
	for _, p := range vd.Problems {
		res.failf("%s: %s check (base %d, tip %d, shipped %d, hydrated by run %d with shipped %d): %s", where, mode, v.Base, v.Tip, m.Shipped, m.HydratedRun, m.HydratedShipped, p)
	}
	m.Apply(v, vd)
	if vd.OK() {
		return true
	}
	e.logf("%s: %s check failed: %d lost, %d duplicates, %d corrupt", where, mode, len(vd.Lost), vd.Duplicates, vd.Corrupt)
	return false
}

// incarnation is one child process: start, kill, reap.
type incarnation struct {
	cfg    Config
	sc     Scenario
	root   string
	bucket string
	run    int
	s3     *fakeS3
	// red makes the child run the red-control workload, killed right
	// after its "B" line.
	red      bool
	redBurst int
}

type killInfo struct {
	beforeReady bool
	delay       time.Duration
	// exitErr is set when the child ended other than by our SIGKILL.
	exitErr error
}

func (k killInfo) from() string {
	if k.beforeReady {
		return "exec"
	}
	return "ready"
}

// pickDelay chooses when to kill the k-th child of a scenario. One kill in
// five counts from the exec (it lands in process start, Open, recovery or
// the reconciliation with the bucket); one in five is a long run (between
// MaxDelay/2 and MaxDelay after the ready line, so every campaign, even a
// short one, acknowledges events); the others are log-uniform between 1 ms
// and MaxDelay after the ready line, so short and long runs are both
// common.
func (inc *incarnation) pickDelay(rng *rand.Rand, k int) killInfo {
	maxD := inc.sc.MaxDelay
	if maxD <= 0 {
		maxD = 400 * time.Millisecond
	}
	switch k % 5 {
	case 4:
		return killInfo{beforeReady: true, delay: time.Millisecond + time.Duration(rng.Int64N(int64(80*time.Millisecond)))}
	case 0:
		return killInfo{delay: maxD/2 + time.Duration(rng.Int64N(int64(maxD/2)))}
	}
	lo, hi := math.Log(float64(time.Millisecond)), math.Log(float64(maxD))
	return killInfo{delay: time.Duration(math.Exp(lo + rng.Float64()*(hi-lo)))}
}

// live runs one child until it is killed, feeding its reports into m.
func (inc *incarnation) live(ctx context.Context, rng *rand.Rand, m *Model) (kill killInfo, err error) {
	sc := inc.sc
	cc := ChildConfig{
		Run: inc.run, Dir: inc.root, Sync: sc.Sync, Writers: sc.Writers, BatchEvery: sc.BatchEvery,
		WriterPause: sc.WriterPause, SegmentMaxBytes: sc.SegmentMaxBytes, SealMaxAge: sc.SealMaxAge,
		TailInterval: sc.TailInterval, SyncWait: sc.SyncWait, GC: sc.GC, GCInterval: sc.GCInterval,
		MaxRetained: sc.MaxRetained, Seed: inc.cfg.Seed, Red: inc.red, RedBurst: inc.redBurst,
	}
	var ep *endpoint
	if inc.s3 != nil {
		if ep, err = inc.s3.serve(sc.PutDelay); err != nil {
			return kill, err
		}
		cc.BucketURL = ep.URL(inc.bucket)
		defer func() {
			dctx, cancel := context.WithTimeout(ctx, inc.cfg.ChildTimeout)
			defer cancel()
			if derr := ep.drain(dctx); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	enc, err := cc.encode()
	if err != nil {
		return kill, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return kill, err
	}
	defer pr.Close()
	stderr := &tailBuffer{max: 8 << 10}
	cmd := exec.Command(inc.cfg.Exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"=1", ConfigEnv+"="+enc)
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	// The kernel kills the child if the parent dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return kill, fmt.Errorf("kill9: start the child: %w", err)
	}
	pw.Close()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	reaped := false
	readDone := make(chan error, 1)
	var readOnce sync.Once
	var readErr error
	drained := func() error {
		readOnce.Do(func() { readErr = <-readDone })
		return readErr
	}
	defer func() {
		if !reaped {
			// Never leave a writer running, whatever went wrong.
			_ = cmd.Process.Kill()
			<-waited
		}
		// The reader owns m until the pipe ends; the caller gets m back
		// only after that.
		_ = drained()
	}()

	ready := make(chan struct{})
	burst := make(chan struct{})
	go func() {
		var once, bonce sync.Once
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l, perr := ParseLine(sc.Text())
			if perr != nil {
				// A kill cannot cut a line (one write each); a malformed
				// line is a harness bug.
				readDone <- perr
				return
			}
			m.Observe(l)
			switch l.Kind {
			case 'R':
				once.Do(func() { close(ready) })
			case 'B':
				bonce.Do(func() { close(burst) })
			}
		}
		readDone <- sc.Err()
	}()

	hang := time.NewTimer(inc.cfg.ChildTimeout)
	defer hang.Stop()
	if !inc.red {
		kill = inc.pickDelay(rng, inc.run-1)
	}
	var fire <-chan time.Time
	if kill.beforeReady {
		fire = time.After(kill.delay)
	}
	early := func(werr error) killInfo {
		reaped = true
		kill.exitErr = fmt.Errorf("the child ended before the kill (%v); its output: %s", werr, stderr.String())
		return kill
	}
	trigger := ready
	if inc.red {
		trigger = burst
	}
	if !kill.beforeReady {
		select {
		case <-trigger:
			fire = time.After(kill.delay)
		case werr := <-waited:
			_ = drained()
			return early(werr), nil
		case <-hang.C:
			return kill, fmt.Errorf("kill9: child run %d not ready within %s; its output: %s", inc.run, inc.cfg.ChildTimeout, stderr.String())
		case <-ctx.Done():
			return kill, ctx.Err()
		}
	}
	select {
	case <-fire:
	case werr := <-waited:
		_ = drained()
		return early(werr), nil
	case <-ctx.Done():
		return kill, ctx.Err()
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return kill, fmt.Errorf("kill9: SIGKILL: %w", err)
	}
	select {
	case werr := <-waited:
		reaped = true
		var xe *exec.ExitError
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !errors.As(werr, &xe) || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			// It ended on its own just before the signal.
			kill.exitErr = fmt.Errorf("the child was not ended by SIGKILL (%v); its output: %s", werr, stderr.String())
		}
	case <-hang.C:
		return kill, fmt.Errorf("kill9: child run %d survived SIGKILL for %s", inc.run, inc.cfg.ChildTimeout)
	}
	if rerr := drained(); rerr != nil {
		return kill, fmt.Errorf("kill9: child run %d reports: %w", inc.run, rerr)
	}
	return kill, nil
}

// tailBuffer keeps the last max bytes written to it (a child's output for
// failure messages). It is safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.b) == 0 {
		return "(none)"
	}
	return string(t.b)
}
