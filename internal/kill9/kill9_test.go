package kill9

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

func TestMain(m *testing.M) {
	if os.Getenv(ChildEnv) != "" {
		// This process is a child of TestKill9: run the workload, never
		// the tests.
		os.Exit(RunChild())
	}
	goleak.VerifyTestMain(m,
		// gocloud's OpenCensus worker is package-level; idle client
		// connections of Restore's buckets end when the servers close.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

var (
	flagKills     = flag.Int("kill9.kills", 0, "kills per scenario (default 3, 2 with -short; env BUCKETLOG_KILL9_KILLS)")
	flagSeed      = flag.Uint64("kill9.seed", 0, "seed of the kill schedule (default: from the clock, logged)")
	flagJSON      = flag.String("kill9.json", "", "write the summary as JSON to this path")
	flagKeep      = flag.String("kill9.keep", "", "run under this directory and keep it (evidence of a failure)")
	flagLabel     = flag.String("kill9.label", "", "free text recorded in the JSON summary (e.g. the commit under test)")
	flagVerbose   = flag.Bool("kill9.verbose", false, "log every kill")
	flagScenarios = flag.String("kill9.scenarios", "", "comma-separated scenario names (default: all)")
)

// fullCampaignKills is the smallest campaign the harness calls "full".
const fullCampaignKills = 300

func killsPerScenario(t *testing.T) int {
	if *flagKills > 0 {
		return *flagKills
	}
	if v := os.Getenv("BUCKETLOG_KILL9_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BUCKETLOG_KILL9_KILLS=%q is not a positive number", v)
		}
		return n
	}
	if testing.Short() {
		return 2
	}
	return 3
}

// scenarios are the campaign's workloads. Segments of 48 KiB roll over
// every ~200 events; writers pause a little so one store stays small
// enough to check in full after every kill.
func scenarios() []Scenario {
	base := Scenario{
		Writers: 32, BatchEvery: 6, WriterPause: 2 * time.Millisecond,
		SegmentMaxBytes: 48 << 10, SealMaxAge: 150 * time.Millisecond,
		EpochKills: 12, MaxDelay: 400 * time.Millisecond,
	}
	local := base
	local.Name = "local"

	localGC := base
	localGC.Name = "local-gc"
	localGC.Writers = 48
	localGC.GC, localGC.GCInterval, localGC.MaxRetained = true, 25*time.Millisecond, 3
	localGC.EpochKills = 25

	async := base
	async.Name = "bucket-async"
	async.Bucket = true
	async.TailInterval = 30 * time.Millisecond
	async.Plan = "RHSRHSRS"
	async.PutDelay = 20 * time.Millisecond

	sync := base
	sync.Name = "bucket-sync"
	sync.Bucket, sync.Sync = true, true
	sync.Writers = 64
	sync.WriterPause = 0
	sync.TailInterval = 40 * time.Millisecond
	sync.SyncWait = 5 * time.Second
	sync.Plan = "RHSRHSRS"

	// A slow bucket and a short wait: some appends answer ErrNotInBucket
	// (durable locally only), and more kills land with uploads in flight.
	// A synchronous group costs two PUTs (the tail object, the cursor
	// object), each held up to PutDelay, plus the read-back GET and, with
	// writer fencing, the HEAD of the next claim: a wait of 2.5 PUT delays
	// acknowledges most groups and times some out.
	slow := sync
	slow.Name = "bucket-sync-slow"
	slow.SyncWait = 150 * time.Millisecond
	slow.PutDelay = 60 * time.Millisecond

	bucketGC := async
	bucketGC.Name = "bucket-gc"
	bucketGC.Writers = 48
	bucketGC.GC, bucketGC.GCInterval, bucketGC.MaxRetained = true, 40*time.Millisecond, 3
	bucketGC.EpochKills = 25
	return []Scenario{local, localGC, async, sync, slow, bucketGC}
}

type summary struct {
	Command          string       `json:"command"`
	Label            string       `json:"label,omitempty"`
	Seed             uint64       `json:"seed"`
	KillsPerScenario int          `json:"kills_per_scenario"`
	WallSeconds      float64      `json:"wall_seconds"`
	Scenarios        []Result     `json:"scenarios"`
	Total            Result       `json:"total"`
	RedControls      []redOutcome `json:"red_controls"`
	Started          time.Time    `json:"started"`
}

// redOutcome is what a red control found: the strict check must see loss,
// the promise the engine makes must hold.
type redOutcome struct {
	Name          string `json:"name"`
	Acked         int    `json:"acked_events"`
	StrictLost    int    `json:"strict_lost"`
	PromiseLost   int    `json:"promise_lost"`
	PromiseWindow int    `json:"promise_window"`
	Note          string `json:"note"`
}

// TestKill9 is the kill -9 campaign: every scenario, then the red
// controls, then the summary (t.Log, and JSON with -kill9.json).
func TestKill9(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	kills := killsPerScenario(t)
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -kill9.seed=%d), %d kills per scenario", seed, seed, kills)
	root := *flagKeep
	if root == "" {
		root = t.TempDir()
	} else if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*flagScenarios, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	start := time.Now()
	sum := summary{Label: *flagLabel, Seed: seed, KillsPerScenario: kills, Started: start.UTC(), Scenarios: []Result{}, RedControls: []redOutcome{},
		Command: "go test -run TestKill9 -count=1 -v ./internal/kill9/ " + strings.Join(testFlags(), " ")}
	for _, sc := range scenarios() {
		if len(want) > 0 && !want[sc.Name] {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			res, err := Run(ctx, Config{Exe: exe, Root: root, Kills: kills, Seed: seed, Logf: t.Logf, Verbose: *flagVerbose}, sc)
			sum.Scenarios = append(sum.Scenarios, res)
			if err != nil {
				t.Fatalf("harness: %v", err)
			}
			for _, f := range res.Failures {
				t.Errorf("%s", f)
			}
			if !res.OK() {
				t.Errorf("scenario %s seed %d: %d lost, %d duplicates, %d corrupt", sc.Name, seed, res.Lost, res.Duplicates, res.Corrupt)
			}
			if res.Kills != kills {
				t.Errorf("ran %d kills, want %d", res.Kills, kills)
			}
			// A campaign that checked nothing proves nothing.
			if res.AckedChecks == 0 || res.AckedEvents == 0 {
				t.Errorf("no acknowledged event was checked (%d acked, %d checks)", res.AckedEvents, res.AckedChecks)
			}
			if sc.GC && res.BaseAdvances == 0 {
				// GC has to run for the scenario to test it; a short
				// campaign may end before the lagging consumer lets it.
				if kills >= 10 {
					t.Errorf("GC never moved the base in %d kills", kills)
				} else {
					t.Logf("GC never moved the base in %d kills", kills)
				}
			}
			if sc.Bucket && (res.Restores == 0 || res.Hydrations+res.HydrationsKilled == 0) && kills >= 3 {
				t.Errorf("a bucket scenario ran %d restores and %d hydrations", res.Restores, res.Hydrations+res.HydrationsKilled)
			}
		})
	}
	if len(want) == 0 || want["red"] {
		t.Run("red", func(t *testing.T) {
			sum.RedControls = append(sum.RedControls, redRestoreAsync(t, exe, root, seed), redLocalTruncated(t, exe, root, seed))
		})
	}
	sum.WallSeconds = float64(time.Since(start).Round(100*time.Millisecond)) / float64(time.Second)
	sum.Total = total(sum.Scenarios)
	t.Logf("kill -9 campaign, seed %d, %.1f s:\n%s", seed, sum.WallSeconds, table(sum))
	if len(want) == 0 && kills*len(scenarios()) >= fullCampaignKills && sum.Total.Kills < fullCampaignKills {
		t.Errorf("full campaign ran %d kills, want at least %d", sum.Total.Kills, fullCampaignKills)
	}
	if *flagJSON != "" {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*flagJSON, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func testFlags() []string {
	var out []string
	flag.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "kill9.") || f.Name == "test.short" {
			out = append(out, "-"+strings.TrimPrefix(f.Name, "test.")+"="+f.Value.String())
		}
	})
	return out
}

func total(rs []Result) Result {
	t := Result{Scenario: "total", Failures: []string{}}
	for _, r := range rs {
		t.Seed = r.Seed
		t.Kills += r.Kills
		t.KillsBeforeReady += r.KillsBeforeReady
		t.TornTailOpens += r.TornTailOpens
		t.Restores += r.Restores
		t.Hydrations += r.Hydrations
		t.HydrationsKilled += r.HydrationsKilled
		t.Segments += r.Segments
		t.BaseAdvances += r.BaseAdvances
		t.ShipReports += r.ShipReports
		t.Epochs += r.Epochs
		t.AckedEvents += r.AckedEvents
		t.PendingEvents += r.PendingEvents
		t.AckedChecks += r.AckedChecks
		t.Lost += r.Lost
		t.Duplicates += r.Duplicates
		t.Corrupt += r.Corrupt
		t.WindowLoss += r.WindowLoss
		t.Reclaimed += r.Reclaimed
		t.MaxTip = max(t.MaxTip, r.MaxTip)
		t.Seconds += r.Seconds
		t.Failures = append(t.Failures, r.Failures...)
	}
	return t
}

func table(s summary) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tkills\tbefore ready\trestores\thydrations\tacked events\tacked checks\tlost\tduplicates\tcorrupt\twindow loss\tnot in bucket\tsegments\tGC moves\tship rises\ttorn tails\tseconds\t")
	for _, r := range append(slices.Clone(s.Scenarios), s.Total) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d+%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t\n", r.Scenario, r.Kills, r.KillsBeforeReady, r.Restores, r.Hydrations, r.HydrationsKilled,
			r.AckedEvents, r.AckedChecks, r.Lost, r.Duplicates, r.Corrupt, r.WindowLoss, r.PendingEvents, r.Segments, r.BaseAdvances, r.ShipReports, r.TornTailOpens, r.Seconds)
	}
	w.Flush()
	for _, r := range s.RedControls {
		fmt.Fprintf(&b, "red control %s: %d acked; strict check lost %d; the engine's promise: %d lost, %d in the window (%s)\n",
			r.Name, r.Acked, r.StrictLost, r.PromiseLost, r.PromiseWindow, r.Note)
	}
	return b.String()
}

// redChild runs one red-control child (a burst, an explicit shipment when
// there is a bucket, a second burst, "B") and kills it right after "B".
func redChild(t *testing.T, exe, root string, seed uint64, sc Scenario, s3 *fakeS3, bucket string) *Model {
	t.Helper()
	m := NewModel()
	inc := incarnation{cfg: Config{Exe: exe, Seed: seed, ChildTimeout: 60 * time.Second}, sc: sc, root: root, bucket: bucket, run: 1, s3: s3, red: true, redBurst: 40}
	kill, err := inc.live(context.Background(), nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if kill.exitErr != nil || len(m.Failures) > 0 {
		t.Fatalf("red child: %v %v", kill.exitErr, m.Failures)
	}
	return m
}

// redRestoreAsync: asynchronous shipping promises only what was shipped.
// Asking a restore for every acknowledged event (ModeStrict) must find the
// second burst missing — the harness sees loss — while the engine's actual
// promise (everything through ShippedThrough) holds.
func redRestoreAsync(t *testing.T, exe, root string, seed uint64) redOutcome {
	s3, err := startFakeS3()
	if err != nil {
		t.Fatal(err)
	}
	defer s3.close()
	if err := s3.createBucket("red"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "red-restore")
	sc := Scenario{Name: "red-restore", Bucket: true, Writers: 8, TailInterval: time.Hour, SealMaxAge: -1}
	m := redChild(t, exe, dir, seed, sc, s3, "red")
	shard := localseg.ShardDir(dir, 0)

	local, err := ReadView(shard)
	if err != nil {
		t.Fatal(err)
	}
	if vd := Check(m, local, ModeLocal); !vd.OK() {
		t.Fatalf("the local disk lost data in the red control: %v", vd.Problems)
	}
	if err := os.RemoveAll(shard); err != nil {
		t.Fatal(err)
	}
	if _, err := bucketlog.Restore(context.Background(), bucketlog.RestoreOptions{BucketURL: s3.parent.URL("red"), Dir: dir}); err != nil {
		t.Fatal(err)
	}
	v, err := ReadView(shard)
	if err != nil {
		t.Fatal(err)
	}
	strict := Check(m.Clone(), v, ModeStrict)
	promise := Check(m.Clone(), v, ModeRestoreAsync)
	beyond := 0
	for seq := range m.Acked {
		if seq > m.Shipped {
			beyond++
		}
	}
	out := redOutcome{Name: "restore-async-all-acked", Acked: len(m.Acked), StrictLost: len(strict.Lost), PromiseLost: len(promise.Lost), PromiseWindow: len(promise.Window),
		Note: fmt.Sprintf("tail tick 1h; shipped through %d, restored tip %d", m.Shipped, v.Tip)}
	if beyond == 0 || len(strict.Lost) != beyond {
		t.Errorf("strict check lost %d, want the %d acknowledged after ShippedThrough %d", len(strict.Lost), beyond, m.Shipped)
	}
	if !promise.OK() || len(promise.Window) != beyond {
		t.Errorf("the async promise: %d lost (%v), %d in the window, want 0 and %d", len(promise.Lost), promise.Problems, len(promise.Window), beyond)
	}
	return out
}

// redLocalTruncated: cutting the active segment after a kill (what a disk
// that dropped acknowledged writes would leave) must show as loss.
func redLocalTruncated(t *testing.T, exe, root string, seed uint64) redOutcome {
	dir := filepath.Join(root, "red-local")
	sc := Scenario{Name: "red-local", Writers: 8}
	m := redChild(t, exe, dir, seed, sc, nil, "")
	shard := localseg.ShardDir(dir, 0)
	v, err := ReadView(shard)
	if err != nil {
		t.Fatal(err)
	}
	if vd := Check(m, v, ModeLocal); !vd.OK() {
		t.Fatalf("the local disk lost data before the cut: %v", vd.Problems)
	}
	st, err := localseg.Open(shard, localseg.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot()
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	last := snap.Segments[len(snap.Segments)-1]
	if err := os.Truncate(filepath.Join(shard, localseg.SegmentFileName(last.ID)), last.Size/2); err != nil {
		t.Fatal(err)
	}
	cut, err := ReadView(shard)
	if errors.Is(err, localseg.ErrLostState) {
		// The store itself now refuses the cut log (its checkpoint counts
		// more events than the files hold; issue 12, finding 9) instead of
		// presenting a shorter one: every acknowledged event is reported.
		return redOutcome{Name: "local-truncated-segment", Acked: len(m.Acked), StrictLost: len(m.Acked), PromiseLost: len(m.Acked),
			Note: fmt.Sprintf("segment %d cut from %d to %d bytes; the store refuses to open: %v", last.ID, last.Size, last.Size/2, err)}
	}
	if err != nil {
		t.Fatal(err)
	}
	vd := Check(m, cut, ModeLocal)
	if len(vd.Lost) == 0 {
		t.Errorf("the check saw no loss after cutting segment %d from %d to %d bytes", last.ID, last.Size, last.Size/2)
	}
	return redOutcome{Name: "local-truncated-segment", Acked: len(m.Acked), StrictLost: len(vd.Lost), PromiseLost: len(vd.Lost),
		Note: fmt.Sprintf("segment %d cut from %d to %d bytes; tip %d → %d", last.ID, last.Size, last.Size/2, v.Tip, cut.Tip)}
}
