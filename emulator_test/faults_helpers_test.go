package emulator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/watermark"
)

// This file holds the machinery of the bucket-fault campaign
// (faults_test.go): a rig that runs one engine over one fault-injecting
// bucket and keeps, next to it, a fault-free view of the same objects (the
// truth at rest); the checks every cell makes; and the report.

// Key patterns of the rules (path.Match over the object key; blobtier.New
// over a raw bucket adds no prefix).
const (
	fltSegKeys  = "noetl.ehdb.seg.*"
	fltTailKeys = "noetl.ehdb.tail.*"
	fltAnyKey   = "*"
)

// fltTimeout is the per-call deadline of the bucket the engine uses: short,
// so a delay beyond it costs little, and far above what an in-process
// bucket needs, so nothing else times out (even under -race).
func fltTimeout(backend string) time.Duration {
	if backend == "s3" {
		return time.Second
	}
	return 400 * time.Millisecond
}

// fltLongDelay is a Delay rule's wait beyond the per-call deadline (the
// deadline cuts it); fltShortDelay one well within it.
const (
	fltLongDelay  = 10 * time.Second
	fltShortDelay = 15 * time.Millisecond
)

// faultRig is one engine over one fault-injecting bucket.
type faultRig struct {
	t       *testing.T
	backend string
	fb      *faultbucket.Bucket
	b       blobtier.Bucket // through the faults: what the engine uses
	clean   blobtier.Bucket // the same objects without faults
	reg     *prometheus.Registry
	root    string
	segMax  int64
	l       *bucketlog.Log
	execs   []string
	acked   []localseg.Record // acked[i] has sequence i+1
	rules   []int

	cell faultCell

	// What the passes under the fault did.
	passes    int
	failed    int
	notReady  int // failed passes after which Health said not ready with a reason
	readyBad  []string
	passErrs  []string
	maxBehind uint64 // largest tip − shipped position seen after a pass under the fault

	// Cold load: what the reads under the fault returned.
	coldChecked int
	coldVerdict []verdict

	// The engine's consumer c after recovery, which a restore must match.
	wantConsumer uint64
	hasConsumer  bool
	lastBase     uint64
}

func newFaultRig(t *testing.T, backend string) *faultRig {
	t.Helper()
	r := &faultRig{t: t, backend: backend, reg: prometheus.NewRegistry(), root: t.TempDir(), segMax: 4096, execs: execsOf(0, 1, 5)}
	var raw, rawClean *blob.Bucket
	switch backend {
	case "mem":
		raw = memblob.OpenBucket(nil)
		rawClean = raw
	case "s3":
		e, err := emulator.StartS3()
		if err != nil {
			t.Fatalf("start s3: %v", err)
		}
		t.Cleanup(func() { e.Close() })
		if err := e.CreateBucket(bucketName); err != nil {
			t.Fatal(err)
		}
		if raw, err = e.OpenBucket(ctxT(t), bucketName); err != nil {
			t.Fatal(err)
		}
		if rawClean, err = e.OpenBucket(ctxT(t), bucketName); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown backend %q", backend)
	}
	r.fb = faultbucket.New(raw, 1)
	r.b = blobtier.New(r.fb.Bucket(), blobtier.Options{Timeout: fltTimeout(backend)})
	r.clean = blobtier.New(rawClean, blobtier.Options{Timeout: time.Minute})
	t.Cleanup(func() {
		r.b.Close() // closes the wrapper and raw with it
		if rawClean != raw {
			r.clean.Close()
		}
	})
	if wantCAS := backend == "s3"; r.b.CanCAS() != wantCAS || r.clean.CanCAS() != wantCAS {
		t.Fatalf("%s: compare-and-swap %v through the faults, %v without; want %v", backend, r.b.CanCAS(), r.clean.CanCAS(), wantCAS)
	}
	return r
}

// options are the engine's options: small segments, no background work
// (every pass is driven by hand), the rig's registry, and a short bound on
// Open's retries of a failing bucket (a cell that leaves a corrupt object
// at rest restarts against it).
func (r *faultRig) options(dir string, reg prometheus.Registerer) bucketlog.Options {
	return bucketlog.Options{Dir: dir, Bucket: r.b, Registerer: reg, SegmentMaxBytes: r.segMax,
		NoBackground: true, StartupTimeout: 2 * time.Second, Logger: fltLogger()}
}

// fltLogger drops the engine's logs: under faults it logs an error per
// failed pass, which is the point of the cell, not news.
func fltLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openEngine opens the rig's engine on its root with its registry.
func (r *faultRig) openEngine() {
	r.t.Helper()
	l, err := bucketlog.Open(ctxT(r.t), r.options(r.root, r.reg))
	if err != nil {
		r.t.Fatalf("open the engine: %v", err)
	}
	r.l = l
	r.t.Cleanup(func() { l.Close() })
}

// localBase is the engine's local reclaim base (the last one seen when the
// engine is closed).
func (r *faultRig) localBase() uint64 {
	if r.l != nil {
		if snap, err := r.l.Store().Snapshot(); err == nil {
			r.lastBase = snap.ReclaimedSeq
		}
	}
	return r.lastBase
}

// reopen closes the engine and opens it again on the same directory (a
// restart: reconcile reads the bucket). It returns Open's error.
func (r *faultRig) reopen() error {
	r.t.Helper()
	r.localBase()
	r.l.Close()
	l, err := bucketlog.Open(ctxT(r.t), r.options(r.root, r.reg))
	if err != nil {
		return err
	}
	r.l = l
	r.t.Cleanup(func() { l.Close() })
	return nil
}

// add appends n events, one at a time except for one batch of three when n
// allows, and fails the test at once if any append fails: a bucket fault
// must never fail an append.
func (r *faultRig) add(n int) {
	r.t.Helper()
	ctx := ctxT(r.t)
	for i := 0; i < n; {
		k := len(r.acked)
		if n-i >= 3 && i == 0 {
			evs := []localseg.Event{event(r.execs, k), event(r.execs, k+1), event(r.execs, k+2)}
			res, err := r.l.AppendBatch(ctx, evs)
			if err != nil {
				r.t.Fatalf("append batch at %d with the bucket failing: %v", k, err)
			}
			for j, e := range evs {
				r.note(res.FirstSequence+uint64(j), e)
			}
			i += 3
			continue
		}
		e := event(r.execs, k)
		res, err := r.l.Append(ctx, e)
		if err != nil {
			r.t.Fatalf("append %d with the bucket failing: %v", k, err)
		}
		r.note(res.Seq, e)
		i++
	}
}

func (r *faultRig) note(seq uint64, e localseg.Event) {
	if seq != uint64(len(r.acked))+1 {
		r.t.Fatalf("append acknowledged sequence %d, want %d", seq, len(r.acked)+1)
	}
	r.acked = append(r.acked, localseg.Record{Seq: seq, ExecutionID: e.ExecutionID, TransactionID: e.TransactionID, Payload: e.Payload})
}

// install adds the cell's rules.
func (r *faultRig) install(rules []faultbucket.Rule) {
	for _, rule := range rules {
		r.rules = append(r.rules, r.fb.MustAdd(rule))
	}
}

// uninstall removes the cell's rules (the bucket recovers).
func (r *faultRig) uninstall() {
	for _, id := range r.rules {
		r.fb.Remove(id)
	}
	r.rules = nil
}

// ship and gc are the passes; under a fault each one's outcome and the
// readiness right after it are recorded.
func (r *faultRig) ship(seal bool) error {
	_, err := r.l.Ship(ctxT(r.t), seal)
	r.pass("ship", err)
	return err
}

func (r *faultRig) gc() error {
	_, err := r.l.GC(ctxT(r.t), bucketlog.GCRequest{Sweep: true}) // the operator's gc
	r.pass("gc", err)
	return err
}

func (r *faultRig) pass(what string, err error) {
	if len(r.rules) == 0 {
		return // recovery passes are judged by the cell
	}
	r.passes++
	if tip, sh := r.l.Store().Tip(), r.l.ShippedThrough(); tip > sh {
		r.maxBehind = max(r.maxBehind, tip-sh)
	}
	if err == nil {
		return
	}
	r.failed++
	if len(r.passErrs) < 2 {
		r.passErrs = append(r.passErrs, what+": "+err.Error())
	}
	ready, reason := r.l.Health()
	if !ready && reason != "" {
		r.notReady++
	} else if !r.cell.readyOK {
		r.readyBad = append(r.readyBad, fmt.Sprintf("%s failed (%v) and Health = %v %q", what, err, ready, reason))
	}
}

// consume makes consumer c ack the tip, so GC may reclaim everything
// sealed and durable.
func (r *faultRig) consume(c string) {
	r.t.Helper()
	if _, err := r.l.Pull(r.t.Context(), c, 1); err != nil {
		r.t.Fatalf("pull %s: %v", c, err)
	}
	if _, err := r.l.Ack(r.t.Context(), c, r.l.Store().Tip()); err != nil {
		r.t.Fatalf("ack %s: %v", c, err)
	}
}

// metrics returns every series of the registry by name (without the
// bucketlog_ prefix) and labels (without shard): counters and gauges by
// value, histograms by sample count.
func fltMetrics(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		name := strings.TrimPrefix(mf.GetName(), "bucketlog_")
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "shard" {
					labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
				}
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// fltSignal reports whether a series says something went wrong: a bucket
// request that did not succeed (a missing object is routine), a failed
// tail put or delete, a failed GC pass, a second writer, a failed
// operation.
func fltSignal(key string) bool {
	switch {
	case strings.HasPrefix(key, "bucket_requests_total{"):
		return !strings.HasSuffix(key, `result="ok"}`) && !strings.HasSuffix(key, `result="not_found"}`)
	case strings.HasPrefix(key, "eventlog_ops_total{"):
		return !strings.HasSuffix(key, `outcome="ok"}`)
	}
	return key == "tail_replication_failed_total" || key == "tail_reclaim_failed_total" ||
		key == `gc_ops_total{outcome="error"}` || key == "second_writer_detected_total"
}

// fltMoved lists the signal series that grew between two gathers, with
// their increase, sorted.
func fltMoved(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if fltSignal(k) && v > before[k] {
			out[k] = v - before[k]
		}
	}
	return out
}

// fltShort abbreviates a series for the table.
func fltShort(key string) string {
	r := strings.NewReplacer("bucket_requests_total", "bucket", `operation=`, "", `result=`, "", `outcome=`, "", `"`, "", "_total", "")
	return r.Replace(key)
}

// bucketTruth is what the bucket alone holds, read without faults.
type bucketTruth struct {
	// mark is the bucket's watermark; when it cannot be read, the
	// engine's local reclaim base stands in for it (the events at or below
	// it were reclaimed on purpose, not lost).
	mark    watermark.Mark
	seqs    map[uint64]bool // event sequences in objects that verify
	corrupt []string        // keys whose objects fail verification (length, digest or frames)
}

// truth reads every segment and tail object of shard 0 through the
// fault-free view and verifies it.
func (r *faultRig) truth() bucketTruth {
	r.t.Helper()
	ctx := ctxT(r.t)
	bt := bucketTruth{seqs: map[uint64]bool{}}
	m, _, err := watermark.Read(ctx, r.clean, 0)
	if err != nil {
		bt.corrupt = append(bt.corrupt, blobtier.WatermarkKey(0))
		m = watermark.Mark{Seq: r.localBase()}
	}
	bt.mark = m
	if _, _, err := r.clean.GetVersioned(ctx, blobtier.CursorKey(0)); err != nil && !errors.Is(err, blobtier.ErrNotFound) {
		bt.corrupt = append(bt.corrupt, blobtier.CursorKey(0))
	}
	for _, kind := range []blobtier.Kind{blobtier.KindSegment, blobtier.KindTail} {
		for info, err := range r.clean.List(ctx, 0, kind) {
			if err != nil {
				r.t.Fatalf("list: %v", err)
			}
			data, _, err := r.clean.Get(ctx, info.Key)
			if err != nil {
				bt.corrupt = append(bt.corrupt, info.Key)
				continue
			}
			var seqs []uint64
			bad := false
			for f, err := range localseg.Frames(data) {
				if err != nil {
					bad = true
					break
				}
				if f.Kind == localseg.KindEvent {
					seqs = append(seqs, f.Seq)
				}
			}
			if bad {
				bt.corrupt = append(bt.corrupt, info.Key)
				continue
			}
			for _, s := range seqs {
				bt.seqs[s] = true
			}
		}
	}
	return bt
}

// restoreView is a restore from the bucket alone into a fresh directory.
type restoreView struct {
	err       error
	base      uint64
	records   []localseg.Record
	consumers map[string]uint64
}

func (r *faultRig) restoreFrom(b blobtier.Bucket) restoreView {
	r.t.Helper()
	dir := r.t.TempDir()
	_, err := bucketlog.Restore(ctxT(r.t), bucketlog.RestoreOptions{Bucket: b, Dir: dir, AllowEmpty: true})
	if err != nil {
		return restoreView{err: err}
	}
	return fltReadDir(r.t, dir)
}

// fltReadDir reads a restored (or hydrated) store read-only.
func fltReadDir(t *testing.T, dir string) restoreView {
	t.Helper()
	l, err := bucketlog.Open(ctxT(t), bucketlog.Options{Dir: dir, ReadOnly: true, Logger: fltLogger()})
	if err != nil {
		t.Fatalf("open the restored store %s: %v", dir, err)
	}
	defer l.Close()
	return fltView(t, l)
}

func fltView(t *testing.T, l *bucketlog.Log) restoreView {
	t.Helper()
	p, err := l.Scan(t.Context(), 0, 100000)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	snap, err := l.Store().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return restoreView{base: p.Base - 1, records: p.Records, consumers: snap.Consumers}
}

// verdict is a view judged against the acknowledged events.
type verdict struct {
	checked int // acknowledged events the view had to hold: (base, bound]
	lost    int // of those, missing
	dups    int // sequences held twice
	wrong   int // records that differ from what was acknowledged, or were never acknowledged
	gaps    int // holes between consecutive records
}

func (v verdict) clean() bool { return v.lost == 0 && v.dups == 0 && v.wrong == 0 && v.gaps == 0 }

func (v verdict) String() string {
	return fmt.Sprintf("checked %d lost %d dups %d wrong %d gaps %d", v.checked, v.lost, v.dups, v.wrong, v.gaps)
}

// judge checks records against the acknowledged events: every one of
// (base, bound] present once with exact bytes, nothing else wrong.
func (r *faultRig) judge(view restoreView, bound uint64) verdict {
	var v verdict
	seen := map[uint64]int{}
	var prev uint64
	for i, rec := range view.records {
		seen[rec.Seq]++
		if seen[rec.Seq] > 1 {
			v.dups++
		}
		if rec.Seq == 0 || rec.Seq > uint64(len(r.acked)) || !fltSame(rec, r.acked[rec.Seq-1]) {
			v.wrong++
		}
		if i > 0 && rec.Seq != prev+1 {
			v.gaps++
		}
		prev = rec.Seq
	}
	for s := view.base + 1; s <= bound; s++ {
		v.checked++
		if seen[s] == 0 {
			v.lost++
		}
	}
	return v
}

func fltSame(a, b localseg.Record) bool {
	return a.Seq == b.Seq && a.ExecutionID == b.ExecutionID && a.TransactionID == b.TransactionID && a.Payload == b.Payload
}

// unrecoverable counts the acknowledged events of (mark, bound] that
// neither the bucket's verifiable objects hold: what a lost disk would lose
// right now, whatever a restore makes of it.
func (bt bucketTruth) unrecoverable(bound uint64) int {
	n := 0
	for s := bt.mark.Seq + 1; s <= bound; s++ {
		if !bt.seqs[s] {
			n++
		}
	}
	return n
}

// namesOneOf reports whether err's text names one of keys.
func namesOneOf(err error, keys []string) (string, bool) {
	if err == nil {
		return "", false
	}
	for _, k := range keys {
		if strings.Contains(err.Error(), k) {
			return k, true
		}
	}
	return "", false
}

// faultRow is one cell of the campaign's report.
type faultRow struct {
	Scenario string `json:"scenario"`
	Fault    string `json:"fault"`
	Backend  string `json:"backend"`
	Injected int64  `json:"injected"`
	// Passes under the fault, how many failed, and after how many of
	// those Health said not ready.
	Passes   int `json:"passes"`
	Failed   int `json:"failed_passes"`
	NotReady int `json:"not_ready_after_failure"`
	// Events checked, lost, duplicated, wrong, across the checks of the
	// cell (the restore under the fault and the one after recovery, and
	// the local store).
	Events int `json:"events_checked"`
	Lost   int `json:"lost"`
	Dups   int `json:"duplicates"`
	Wrong  int `json:"wrong"`
	// Unrecoverable: acknowledged, shipped events no verifiable bucket
	// object holds (what a lost disk would lose), at the end of the cell.
	Unrecoverable       int `json:"unrecoverable_from_bucket"`
	UnrecoverableDuring int `json:"unrecoverable_from_bucket_under_fault"`
	// MaxBehind is the largest tip − shipped position after a pass under
	// the fault: the events only the local disk held.
	MaxBehind uint64 `json:"max_unshipped_events"`
	// Detected says who noticed the fault and how.
	Detected string `json:"detected"`
	// Metrics are the signal series that moved under the fault.
	Metrics  map[string]float64 `json:"metrics"`
	Restore  string             `json:"restore_after_recovery"`
	Restart  string             `json:"restart_after_recovery"`
	ReadyEnd bool               `json:"ready_after_recovery"`
	Verdict  string             `json:"verdict"`
	Seconds  float64            `json:"seconds"`
}

// faultReport collects the rows of one campaign run.
type faultReport struct {
	rows []faultRow
}

func (fr *faultReport) metricsCell(m map[string]float64) string {
	if len(m) == 0 {
		return "—"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s+%g", fltShort(k), m[k]))
	}
	return strings.Join(parts, " ")
}

// log prints the table and, with writeJSON, writes it as JSON when
// BUCKETLOG_FAULTS_JSON names a file.
func (fr *faultReport) log(t *testing.T, writeJSON bool) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-9s %-20s %-3s %4s %6s %5s %4s %4s %5s %5s %5s  %-50s %-46s %s\n",
		"scenario", "fault", "bk", "inj", "failed", "evts", "lost", "dups", "wrong", "unshp", "unrc", "detected", "metrics moved under the fault", "after recovery")
	for _, row := range fr.rows {
		fmt.Fprintf(&b, "%-9s %-20s %-3s %4d %2d/%-3d %5d %4d %4d %5d %5d %2d/%-2d  %-50s %-46s restore=%s restart=%s ready=%v\n",
			row.Scenario, row.Fault, row.Backend, row.Injected, row.Failed, row.Passes, row.Events, row.Lost, row.Dups, row.Wrong,
			row.MaxBehind, row.UnrecoverableDuring, row.Unrecoverable, row.Detected, fr.metricsCell(row.Metrics), row.Restore, row.Restart, row.ReadyEnd)
	}
	b.WriteString("inj: faults injected; failed: passes that failed / passes under the fault; evts: events checked (local store, restore under the fault up to the shipped position, restore after recovery); " +
		"unshp: most events only the local disk held after a pass under the fault; unrc: acknowledged shipped events no verifiable bucket object holds, under the fault / after recovery\n")
	t.Log(b.String())
	for _, row := range fr.rows {
		t.Logf("VERDICT %s × %s (%s): %s", row.Scenario, row.Fault, row.Backend, row.Verdict)
	}
	if path := os.Getenv("BUCKETLOG_FAULTS_JSON"); writeJSON && path != "" {
		data, err := json.MarshalIndent(fr.rows, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		t.Logf("wrote %d cells to %s", len(fr.rows), path)
	}
}

// fltCorruptErr reports whether err is a verification failure (a restore's
// or an open's) rather than a transport error.
func fltCorruptErr(err error) bool {
	return errors.Is(err, coldload.ErrCorrupt) || errors.Is(err, blobtier.ErrCorrupt) || errors.Is(err, localseg.ErrCorrupt)
}
