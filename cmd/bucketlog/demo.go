package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	register(command{name: "demo", group: groupServer, run: runDemo,
		summary: "the whole job on an in-process memory bucket: two shards, ship, GC, lose the disk, restore, verify"})
}

const demoAbout = `
Runs bucketlog's main job end to end with no cloud account, no Docker and no
network, on a bucket held in this process's memory and temporary
directories that are removed at the end. The bucket is like mem:// but with
conditional writes (blobtier/memcas, a new version on every write), because
the reclaim watermark is written by compare-and-swap, which mem:// cannot do
(bucketlog refuses shared GC there). The same scenario against an S3
emulator is examples/demo; against a real bucket, use ship, gc, restore and
verify with --bucket.

  1. open two shards (0 of 2 and 1 of 2, each on its own "disk") shipping
     to the bucket, with small segments so several seal;
  2. append --events events from --writers concurrent writers over
     --executions executions, each routed to the shard that owns it;
  3. ship: sealed segments and the unsealed tail go to the bucket;
  4. a durable consumer on each shard pulls and acks half of its events;
  5. GC reclaims the segments every consumer has acked (watermark first,
     then the local files and the bucket objects below it);
  6. append --after-gc more events (they live only in the unsealed tail),
     then close both shards (Close ships the tail one last time);
  7. delete both disks, restore each shard from the bucket alone, and check
     every event above the reclaim watermark is there with its exact
     payload, the consumers' cursors survived, and each restored shard
     continues its sequence.

Prints a short summary (--json: one JSON object with the fields events,
shards, segments_sealed, bucket_objects, bucket_bytes, reclaimed_events,
restored_events, restore_seconds, seconds, nothing_lost). Exits 0 only when
nothing was lost; 1 (invariant) naming what was lost otherwise.`

// demoConfig is what the demo runs with.
type demoConfig struct {
	events, afterGC, executions, writers int
	segmentMaxBytes                      int64
	tailInterval                         time.Duration
	// tamper, for tests, runs on the bucket after both shards closed and
	// before the restore (a RED control deletes an object there).
	tamper func(ctx context.Context, b *blob.Bucket) error
	// progress receives one line per phase (stderr).
	progress io.Writer
}

// demoShard is one shard's part of the report.
type demoShard struct {
	Shard           int     `json:"shard"`
	Events          int     `json:"events"`
	SegmentsSealed  int     `json:"segments_sealed"`
	ConsumerAcked   uint64  `json:"consumer_acked"`
	ReclaimedEvents uint64  `json:"reclaimed_events"`
	ReclaimedSegs   int     `json:"reclaimed_segments"`
	RestoredObjects int     `json:"restored_objects"`
	RestoredBytes   int64   `json:"restored_bytes"`
	RestoredEvents  int     `json:"restored_events"`
	TailRecords     int     `json:"restored_from_tail_objects"`
	RestoreSeconds  float64 `json:"restore_seconds"`
}

// demoReport is the demo's summary.
type demoReport struct {
	Action           string      `json:"action"`
	Bucket           string      `json:"bucket"`
	Events           int         `json:"events"`
	Executions       int         `json:"executions"`
	Writers          int         `json:"writers"`
	SegmentMaxBytes  int64       `json:"segment_max_bytes"`
	Shards           []demoShard `json:"shards"`
	SegmentsSealed   int         `json:"segments_sealed"`
	ObjectsBeforeGC  int         `json:"bucket_objects_before_gc"`
	BucketObjects    int         `json:"bucket_objects"`
	BucketBytes      int64       `json:"bucket_bytes"`
	ReclaimedEvents  uint64      `json:"reclaimed_events"`
	RestoredEvents   int         `json:"restored_events"`
	RestoreSeconds   float64     `json:"restore_seconds"`
	Seconds          float64     `json:"seconds"`
	NothingLost      bool        `json:"nothing_lost"`
	Problems         []string    `json:"problems"`
	appendedBeforeGC int
}

func runDemo(c *cli, args []string) int {
	f := newFlags("demo", "[--json] [--events N] [--writers N] [--executions N]", demoAbout)
	asJSON := f.Bool("json", false, "print the summary as one JSON object")
	events := f.Int("events", 4000, "events appended before GC")
	afterGC := f.Int("after-gc", 400, "events appended after GC (shipped only by the tail)")
	writers := f.Int("writers", 8, "concurrent writers")
	executions := f.Int("executions", 300, "executions the events spread over")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	switch {
	case *events < 1 || *events > 1_000_000:
		return c.fail(usagef("--events %d is outside 1..1000000", *events))
	case *afterGC < 0 || *afterGC > 1_000_000:
		return c.fail(usagef("--after-gc %d is outside 0..1000000", *afterGC))
	case *writers < 1 || *writers > 256:
		return c.fail(usagef("--writers %d is outside 1..256", *writers))
	case *executions < 1 || *executions > 1_000_000:
		return c.fail(usagef("--executions %d is outside 1..1000000", *executions))
	}
	cfg := demoConfig{events: *events, afterGC: *afterGC, writers: *writers, executions: *executions,
		segmentMaxBytes: 64 << 10, tailInterval: 200 * time.Millisecond, progress: c.stderr}
	rep, err := demo(c.ctx, cfg, c)
	if *asJSON {
		if err != nil {
			return c.failWith(rep, err)
		}
		return c.emit(rep)
	}
	if rep.Events > 0 {
		printDemo(c.stdout, rep)
	}
	if err != nil {
		return c.fail(err)
	}
	return 0
}

// printDemo writes the human summary.
func printDemo(w io.Writer, r demoReport) {
	fmt.Fprintf(w, "bucketlog demo: 2 shards shipping to %s, %d KiB segments\n", r.Bucket, r.SegmentMaxBytes>>10)
	fmt.Fprintf(w, "  appended   %d events (%d by %d concurrent writers over %d executions, %d more after GC)\n",
		r.Events, r.appendedBeforeGC, r.Writers, r.Executions, r.Events-r.appendedBeforeGC)
	for _, s := range r.Shards {
		fmt.Fprintf(w, "  shard %d    %d events, %d segments sealed; consumer acked %d; GC reclaimed %d events (%d segments)\n",
			s.Shard, s.Events, s.SegmentsSealed, s.ConsumerAcked, s.ReclaimedEvents, s.ReclaimedSegs)
	}
	fmt.Fprintf(w, "  bucket     %d objects before GC; %d objects, %s after close\n", r.ObjectsBeforeGC, r.BucketObjects, humanBytes(r.BucketBytes))
	fmt.Fprintf(w, "  disk       both shard directories deleted\n")
	for _, s := range r.Shards {
		fmt.Fprintf(w, "  restore    shard %d: %d objects, %s, %d events (%d from tail objects) in %.3fs\n",
			s.Shard, s.RestoredObjects, humanBytes(s.RestoredBytes), s.RestoredEvents, s.TailRecords, s.RestoreSeconds)
	}
	if r.NothingLost {
		fmt.Fprintf(w, "  verified   all %d retained events present with their exact payloads (%d reclaimed after their consumers acked them), cursors kept, sequences continue: nothing lost\n",
			r.RestoredEvents, r.ReclaimedEvents)
	} else {
		fmt.Fprintf(w, "  LOST       %d problem(s):\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(w, "             %s\n", p)
		}
	}
	fmt.Fprintf(w, "  total      %.2fs\n", r.Seconds)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// demoEvent is an acknowledged event, as the demo expects to find it.
type demoEvent struct {
	exec, txn, payload string
}

// demoPayload is event i's payload: JSON text with characters a careless
// encoder would alter (<, >, &, quotes, non-ASCII, U+2028), of varying
// length.
func demoPayload(i int, exec string) string {
	return fmt.Sprintf(`{"execution":%q,"step":%d,"note":"order líne <%d> & \"ok\" ✓ \u2028","pad":%q}`,
		exec, i, i, strings.Repeat("x", 40+i%160))
}

// demo runs the scenario. It returns what it found; err is non-nil when
// anything was lost or a step failed.
func demo(ctx context.Context, cfg demoConfig, c *cli) (rep demoReport, err error) {
	start := time.Now()
	rep = demoReport{Action: "demo", Executions: cfg.executions, Writers: cfg.writers, SegmentMaxBytes: cfg.segmentMaxBytes, Problems: []string{}}
	defer func() { rep.Seconds = time.Since(start).Seconds() }()
	say := func(format string, args ...any) {
		if cfg.progress != nil {
			fmt.Fprintf(cfg.progress, "demo: "+format+"\n", args...)
		}
	}

	// One in-memory bucket with conditional writes, shared by both shards
	// and the restores as one S3 bucket would be; raw is its unverified
	// view, for counting (and the tests' tampering).
	raw := memcas.OpenBucket(time.Now)
	bucket := blobtier.New(raw, blobtier.Options{})
	defer bucket.Close() // closes raw
	rep.Bucket = "an in-process memory bucket with conditional writes"

	root, err := os.MkdirTemp("", "bucketlog-demo-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(root)

	const shards = 2
	own := func(i int) bucketlog.Options {
		return bucketlog.Options{
			Dir:        filepath.Join(root, fmt.Sprintf("disk-%d", i)),
			ShardIndex: i, ShardCount: shards,
			Bucket:          bucket,
			SegmentMaxBytes: cfg.segmentMaxBytes,
			TailInterval:    cfg.tailInterval,
			GC:              bucketlog.GCOptions{MinRetainedSegments: 2},
			Logger:          c.log,
		}
	}
	logs := make([]*bucketlog.Log, shards)
	defer func() {
		for _, l := range logs {
			if l != nil {
				l.Close()
			}
		}
	}()
	for i := range logs {
		if logs[i], err = bucketlog.Open(ctx, own(i)); err != nil {
			return rep, fmt.Errorf("open shard %d: %w", i, err)
		}
	}

	// Every acknowledged event, by shard and sequence.
	var mu sync.Mutex
	expected := make([]map[uint64]demoEvent, shards)
	for i := range expected {
		expected[i] = map[uint64]demoEvent{}
	}
	execs := make([]string, cfg.executions)
	for i := range execs {
		execs[i] = fmt.Sprint(100000 + i)
	}
	appendAll := func(from, n int) error {
		var wg sync.WaitGroup
		errs := make([]error, cfg.writers)
		for w := range cfg.writers {
			wg.Go(func() {
				for i := from + w; i < from+n; i += cfg.writers {
					exec := execs[i%len(execs)]
					shard := affinity.ShardFor(exec, shards)
					ev := demoEvent{exec: exec, txn: fmt.Sprintf("txn-%d", i), payload: demoPayload(i, exec)}
					res, err := logs[shard].Append(ctx, localseg.Event{ExecutionID: ev.exec, TransactionID: ev.txn, Payload: ev.payload})
					if err != nil {
						errs[w] = fmt.Errorf("append event %d to shard %d: %w", i, shard, err)
						return
					}
					mu.Lock()
					expected[shard][res.Seq] = ev
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	if err := appendAll(0, cfg.events); err != nil {
		return rep, err
	}
	rep.appendedBeforeGC = cfg.events
	say("appended %d events from %d writers", cfg.events, cfg.writers)

	// Ship now, so GC finds the sealed segments durable in the bucket (the
	// background uploader and tail ticker have been shipping all along).
	for i, l := range logs {
		if _, err := l.Ship(ctx, false); err != nil {
			return rep, fmt.Errorf("ship shard %d: %w", i, err)
		}
	}
	objs, _, err := countObjects(ctx, raw)
	if err != nil {
		return rep, err
	}
	rep.ObjectsBeforeGC = objs

	// A consumer per shard reads and acks half its events; GC reclaims what
	// every consumer has acked.
	const consumer = "demo-projector"
	rep.Shards = make([]demoShard, shards)
	for i, l := range logs {
		ds := &rep.Shards[i]
		ds.Shard = i
		half := max(1, len(expected[i])/2)
		p, err := l.Pull(ctx, consumer, half)
		if err != nil {
			return rep, fmt.Errorf("pull shard %d: %w", i, err)
		}
		if len(p.Records) == 0 {
			continue
		}
		last := p.Records[len(p.Records)-1].Seq
		if ds.ConsumerAcked, err = l.Ack(ctx, consumer, last); err != nil {
			return rep, fmt.Errorf("ack shard %d: %w", i, err)
		}
		gc, err := l.GC(ctx, bucketlog.GCRequest{})
		if err != nil {
			return rep, fmt.Errorf("GC shard %d: %w", i, err)
		}
		ds.ReclaimedEvents = gc.Base - 1
		ds.ReclaimedSegs = gc.SegmentsBefore - gc.SegmentsAfter
	}
	say("consumers acked half of each shard; GC reclaimed %d+%d events", rep.Shards[0].ReclaimedEvents, rep.Shards[1].ReclaimedEvents)

	if err := appendAll(cfg.events, cfg.afterGC); err != nil {
		return rep, err
	}
	for i, l := range logs {
		snap, err := l.Store().Snapshot()
		if err != nil {
			return rep, err
		}
		// Sealed segments: every id below the active one, reclaimed or
		// not.
		rep.Shards[i].SegmentsSealed = int(snap.Segments[len(snap.Segments)-1].ID) - 1
		rep.Shards[i].Events = len(expected[i])
		rep.SegmentsSealed += rep.Shards[i].SegmentsSealed
		rep.Events += len(expected[i])
		rep.ReclaimedEvents += rep.Shards[i].ReclaimedEvents
	}
	// Close ships the tail one last time: the events appended after GC are
	// in the bucket only through it.
	for i, l := range logs {
		logs[i] = nil
		if err := l.Close(); err != nil {
			return rep, fmt.Errorf("close shard %d: %w", i, err)
		}
	}
	if rep.BucketObjects, rep.BucketBytes, err = countObjects(ctx, raw); err != nil {
		return rep, err
	}
	if cfg.tamper != nil {
		if err := cfg.tamper(ctx, raw); err != nil {
			return rep, err
		}
	}

	// The disks are lost.
	for i := range shards {
		if err := os.RemoveAll(own(i).Dir); err != nil {
			return rep, err
		}
	}
	say("closed both shards and deleted their disks; restoring from the bucket alone")

	for i := range shards {
		ds := &rep.Shards[i]
		dir := filepath.Join(root, fmt.Sprintf("new-disk-%d", i))
		// The progress callback counts the segment and tail objects
		// downloaded (the report's own counts add the watermark and cursor
		// objects).
		var got coldload.Progress
		rr, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{Bucket: bucket, Shard: i, Dir: dir,
			Progress: func(p coldload.Progress) { got = p }})
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("shard %d: restore failed: %v", i, err))
			continue
		}
		ds.RestoredObjects, ds.RestoredBytes, ds.TailRecords, ds.RestoreSeconds = got.Objects, got.Bytes, rr.TailRecords, rr.Seconds
		problems, n, err := verifyRestored(ctx, own(i), dir, expected[i], consumer, ds.ConsumerAcked)
		if err != nil {
			return rep, err
		}
		ds.RestoredEvents = n
		rep.RestoredEvents += n
		rep.RestoreSeconds += rr.Seconds
		rep.Problems = append(rep.Problems, problems...)
	}
	rep.NothingLost = len(rep.Problems) == 0
	if !rep.NothingLost {
		return rep, fmt.Errorf("%w: the restore lost or changed events: %s", bucketlog.ErrInvariant, strings.Join(rep.Problems, "; "))
	}
	say("restored and verified")
	return rep, nil
}
