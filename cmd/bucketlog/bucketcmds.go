package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/inspect"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	register(command{name: "ship", group: groupBucket, run: runShip,
		summary: "ship one shard to its bucket now: seal what is due, upload sealed segments and the tail"})
	register(command{name: "restore", group: groupBucket, run: runRestore,
		summary: "rebuild one shard from the bucket alone into an empty directory"})
	register(command{name: "verify", group: groupBucket, run: runVerify,
		summary: "check every object of a bucket's shards (exit 1 listing every problem)"})
	register(command{name: "gc", group: groupBucket, run: runGC,
		summary: "reclaim consumed segments now (locally, and in the bucket behind the watermark)"})
	register(command{name: "inspect", group: groupLog, run: runInspect,
		summary: "describe a shard directory read-only: segments, checkpoint, manifest, problems"})
}

const shipAbout = `
Runs one shipping pass of shard --shard now, as the shard's writer (it takes
the lock: exit 3 while a server owns the shard): seal the active segment if
it is due (always with --seal-active), upload every sealed segment the bucket
lacks (each checked frame by frame first), ship the unsealed tail as tail
objects and the cursor object, and delete tail objects a durable segment
supersedes. On first use it records the bucket in the shard directory
(bucket.json); from then on gc and serve need that bucket. Opening refuses a
local disk that is behind the bucket or disagrees with it (exit 3), and a
different object under one of the shard's write-once keys stops shipping
(second writer, exit 5).

Output (report fields):
  action           "ship"
  shard            the shard shipped
  sealed           this pass sealed the active segment
  upload           {"segments_uploaded","bytes_uploaded","segments_pending"}
  tail_batches     tail objects written by this pass
  tail_records     events in them
  tail_bytes       their bytes
  shipped_through  the highest sequence the bucket now holds contiguously
  tip              the shard's highest sequence
  segments         segment files in the shard directory`

func runShip(c *cli, args []string) int {
	s := newOneShard("ship", "--bucket URL [--dir PATH] [--shard N] [--seal-active]", shipAbout)
	bucket := addBucketFlag(s.f, "the bucket to ship to (required)")
	sealActive := s.f.Bool("seal-active", false, "seal the active segment first, even if it is not due, so everything ships as segments")
	fence := addFencingFlags(s.f, true)
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	env, opts, _, err := s.resolve(c)
	if err != nil {
		return c.fail(err)
	}
	if opts.BucketURL, err = bucket.required(s.f, env); err != nil {
		return c.fail(err)
	}
	opts.NoBackground = true
	fence.apply(&opts)
	l, err := bucketlog.Open(c.ctx, opts)
	if err != nil {
		return c.fail(err)
	}
	rep, err := l.Ship(c.ctx, *sealActive)
	c.closeLog(l)
	out := struct {
		Action string `json:"action"`
		bucketlog.ShipReport
	}{"ship", rep}
	if err != nil {
		return c.failWith(out, err)
	}
	return c.emit(out)
}

const restoreAbout = `
Rebuilds shard --shard from the bucket alone into DIR/shard-NNNN, which must
not hold a store (exit 3 otherwise): reads the reclaim watermark first, then
downloads and verifies every segment above it (length, digest, every frame),
appends the tail objects that continue them, and applies the cursor object.
It stops at the first gap (exit 3, naming the missing range) unless
--allow-partial keeps the prefix; it checks it reached the cursor object's
shipped_through; finding no object at all is exit 3 unless --allow-empty (a
wrong prefix must not look like an empty log). A reclaim watermark that
nothing else in the bucket vouches for (above the cursor object's
shipped_through and above every sequence the segment and tail objects hold)
is exit 3 unless --allow-watermark-ahead takes it as it is. A damaged cursor
object does not stop the restore: consumers then come from the frames
alone, shipped_through is not checked, and cursor_damaged says so. Two
objects with different bytes for one sequence (two writers) and a corrupt
segment or tail object are exit 5. The restored directory records the
bucket, so the store ships there.
A progress line goes to stderr every second, and one at the end.

--all-shards restores every shard the bucket holds (found by listing it;
stderr names them) into DIR/shard-NNNN each, and prints
  {"action":"restore","shards_found":[…],"restored":[report…],"skipped":[…]}
stopping at the first shard that fails. --if-not-exists skips a shard whose
directory already holds a store (exit 0, nothing done:
{"action":"restore","shard","dir","skipped":true,"reason"}), for an init
container that restores only a pod's new, empty volume.

Output (report fields):
  action                 "restore"
  shard, dir             what was restored, where
  objects, bytes         objects read (watermark, cursor, segments, tails), their bytes
  seconds                wall time
  base                   the first retained sequence: the watermark + 1 (as scan and inspect say)
  watermark, base_segment   the bucket's reclaim watermark (reclaim.json): sequence and segment
  first_sequence, last_sequence   the events the store now holds (0..0: none)
  segments, segment_bytes         segment files written
  orphan_segments, tail_objects_below_watermark   skipped objects at or below the watermark
  tail_objects, tail_objects_superseded, tail_records   tail objects used, redundant ones, events from tails
  unparsed_keys          keys in the shard's key space that were not understood (never read)
  next_segment           the id of the new active segment (above every id the bucket has seen)
  filler_segments        empty segment files a partial restore created
  shipped_through        the cursor object's shipped_through
  consumers, clamped_cursors   consumers restored, and cursors lowered to the restored tip
  consumers_deleted      consumers the frames carry but the cursor object shows were deleted
  cursor_damaged         the cursor object was damaged; restored without it
  watermark_ahead        why the watermark was unsupported (--allow-watermark-ahead)
  gaps, short            what --allow-partial stepped over
  empty                  the bucket held nothing for the shard (--allow-empty)
  attempts               restarts because the bucket changed while it was read`

func runRestore(c *cli, args []string) int {
	s := newOneShard("restore", "--bucket URL --dir PATH [--shard N | --all-shards] [--if-not-exists] [--allow-partial] [--allow-empty] [--allow-watermark-ahead]", restoreAbout)
	bucket := addBucketFlag(s.f, "the bucket to restore from (required)")
	partial := s.f.Bool("allow-partial", false, "keep the contiguous prefix when the bucket's history has a hole or ends short of shipped_through")
	allowEmpty := s.f.Bool("allow-empty", false, "accept a bucket holding nothing of the shard (an empty store)")
	allowAhead := s.f.Bool("allow-watermark-ahead", false, "take a reclaim watermark that nothing else in the bucket vouches for as it is")
	conc := s.f.Int("concurrency", 0, "objects downloaded at once (default 8)")
	allShards := s.f.Bool("all-shards", false, "restore every shard the bucket holds (found by listing it) into DIR/shard-NNNN each")
	ifNotExists := s.f.Bool("if-not-exists", false, "a shard whose directory already holds a store is skipped (exit 0, nothing done), for init containers")
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	if !s.f.isSet("dir") && !s.f.isSet("root") {
		return c.fail(usagef("missing required flag --dir (bucketlog restore --help)"))
	}
	if *allShards && s.f.isSet("shard") {
		return c.fail(usagef("--all-shards and --shard exclude each other"))
	}
	env, opts, n, err := s.resolve(c)
	if *allShards && err != nil && !s.f.isSet("shard") && errors.Is(err, env.shardErr) {
		err = nil // the environment's shard pair plays no part
	}
	if err != nil {
		return c.fail(err)
	}
	url, err := bucket.required(s.f, env)
	if err != nil {
		return c.fail(err)
	}
	if *conc < 0 {
		return c.fail(usagef("--concurrency %d is negative", *conc))
	}
	ro := bucketlog.RestoreOptions{BucketURL: url, Dir: opts.Dir,
		AllowPartial: *partial, AllowEmpty: *allowEmpty, AllowWatermarkAhead: *allowAhead, Concurrency: *conc}
	if !*allShards {
		if skip, ok, err := skipRestore(*ifNotExists, opts.Dir, n); err != nil {
			return c.fail(err)
		} else if ok {
			fmt.Fprintf(c.stderr, "restore: shard %d: %s\n", n, skip.Reason)
			return c.emit(skip)
		}
		out, err := c.restoreShard(ro, n)
		if err != nil {
			if out.Objects == 0 && len(out.Gaps) == 0 && out.Short == nil {
				return c.fail(err) // refused before reading anything: no report to show
			}
			return c.failWith(out, err)
		}
		return c.emit(out)
	}

	// --all-shards: what the bucket holds, each shard in turn.
	bk, err := blobtier.Open(c.ctx, url, blobtier.Options{})
	if err != nil {
		return c.fail(fmt.Errorf("%w: %v", bucketlog.ErrUsage, err))
	}
	found, err := blobtier.Shards(c.ctx, bk)
	bk.Close()
	if err != nil {
		return c.fail(err)
	}
	out := restoreAllOutput{Action: "restore", ShardsFound: found, Restored: []restoreOutput{}, Skipped: []restoreSkip{}}
	fmt.Fprintf(c.stderr, "restore: the bucket holds shards %v\n", found)
	if len(found) == 0 && !*allowEmpty {
		return c.failWith(out, fmt.Errorf("%w: the bucket holds no object of any shard (a wrong bucket or prefix?); --allow-empty accepts that", bucketlog.ErrInvalidState))
	}
	for _, shard := range found {
		skip, ok, err := skipRestore(*ifNotExists, opts.Dir, int(shard))
		if err != nil {
			return c.failWith(out, err)
		}
		if ok {
			fmt.Fprintf(c.stderr, "restore: shard %d: %s\n", shard, skip.Reason)
			out.Skipped = append(out.Skipped, skip)
			continue
		}
		rep, err := c.restoreShard(ro, int(shard))
		if err != nil {
			return c.failWith(out, fmt.Errorf("shard %d: %w", shard, err))
		}
		out.Restored = append(out.Restored, rep)
	}
	return c.emit(out)
}

// restoreAllOutput is restore --all-shards' report.
type restoreAllOutput struct {
	Action      string          `json:"action"`
	ShardsFound []uint32        `json:"shards_found"`
	Restored    []restoreOutput `json:"restored"`
	Skipped     []restoreSkip   `json:"skipped"`
}

// restoreSkip is a shard --if-not-exists left alone.
type restoreSkip struct {
	Action  string `json:"action"`
	Shard   int    `json:"shard"`
	Dir     string `json:"dir"`
	Skipped bool   `json:"skipped"`
	Reason  string `json:"reason"`
}

// skipRestore decides --if-not-exists for shard n: ok when the shard's
// directory already holds a store (a segment file or a reclaim manifest,
// as restore itself decides), which restore would refuse.
func skipRestore(ifNotExists bool, root string, n int) (restoreSkip, bool, error) {
	if !ifNotExists {
		return restoreSkip{}, false, nil
	}
	dir := localseg.ShardDir(root, n)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return restoreSkip{}, false, nil
	}
	if err != nil {
		return restoreSkip{}, false, fmt.Errorf("%w: %s: %v", bucketlog.ErrInvalidState, dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "seg-") || e.Name() == "reclaim.json" {
			return restoreSkip{Action: "restore", Shard: n, Dir: dir, Skipped: true,
				Reason: "the directory already holds a store; nothing done (--if-not-exists)"}, true, nil
		}
	}
	return restoreSkip{}, false, nil
}

// restoreShard restores shard n with progress lines on stderr.
func (c *cli) restoreShard(ro bucketlog.RestoreOptions, n int) (restoreOutput, error) {
	var last time.Time
	var lastP coldload.Progress
	start := time.Now()
	ro.Shard = n
	ro.Progress = func(p coldload.Progress) {
		lastP = p
		if now := time.Now(); now.Sub(last) >= time.Second && now.Sub(start) >= time.Second {
			last = now
			fmt.Fprintf(c.stderr, "restore: shard %d: %s\n", n, progressLine(p))
		}
	}
	rep, err := bucketlog.Restore(c.ctx, ro)
	out := restoreOutput{Action: "restore", Report: rep, Base: rep.Base + 1, Watermark: rep.Base}
	if err != nil {
		return out, err
	}
	if rep.CursorDamaged {
		fmt.Fprintf(c.stderr, "restore: shard %d: warning: the cursor object is damaged; consumers come from the frames alone and shipped_through was not checked\n", n)
	}
	if rep.WatermarkAhead != "" {
		fmt.Fprintf(c.stderr, "restore: shard %d: warning: %s\n", n, rep.WatermarkAhead)
	}
	// The report's counts, which include the watermark and cursor objects
	// the progress callbacks do not count: the line and the JSON agree.
	lastP.Objects, lastP.ObjectsTotal = rep.Objects, max(rep.Objects, lastP.ObjectsTotal)
	lastP.Bytes, lastP.BytesTotal = rep.Bytes, max(rep.Bytes, lastP.BytesTotal)
	fmt.Fprintf(c.stderr, "restore: shard %d: done: %s, sequences %d..%d, %.2fs\n", n, progressLine(lastP), rep.FirstSeq, rep.LastSeq, rep.Seconds)
	return out, nil
}

// restoreOutput is restore's report. base is the first retained sequence
// (the watermark + 1), as scan and inspect report it; watermark is the
// bucket's reclaim watermark itself.
type restoreOutput struct {
	Action string `json:"action"`
	coldload.Report
	Base      uint64 `json:"base"`
	Watermark uint64 `json:"watermark"`
}

// verifyShardOutput is one shard of verify's report, with base meaning what
// it means everywhere (see restoreOutput).
type verifyShardOutput struct {
	coldload.ShardReport
	Base      uint64 `json:"base"`
	Watermark uint64 `json:"watermark"`
}

func progressLine(p coldload.Progress) string {
	return fmt.Sprintf("%d/%d objects, %d/%d bytes", p.Objects, p.ObjectsTotal, p.Bytes, p.BytesTotal)
}

const verifyAbout = `
Checks the bucket's objects of the chosen shards without writing anything:
every segment and tail object's length, digest and frames, tail objects
against their keys, segment ids contiguous above the watermark, sequences
continuing across objects, overlapping objects identical, and the cursor
object within what the bucket holds, and the reclaim watermark vouched for
by the other objects. Without --shards (e.g. 0,1,3) or --shard-count N
(0..N-1) it checks every shard the bucket holds, found by listing it, and
names them in shards_found. A shard asked for that holds no object, and a
bucket that holds no shard at all, are problems (class missing). Exit 0
when no problem is found, 1 listing every problem (5 when the bucket cannot
be listed).

Output (report fields):
  action     "verify"
  ok         no problem found
  shards_found   the shards the bucket holds (when neither --shards nor --shard-count)
  shards     per shard: shard, present, base (the first retained sequence, the
             watermark + 1, as scan and inspect say), watermark and base_segment
             (the reclaim watermark), segments, tail_objects,
             through (what a restore would reach), shipped_through, consumers,
             orphan_segments, tail_objects_below_watermark, tail_objects_superseded,
             unparsed_keys, problems (a count)
  objects, bytes, seconds   objects read, their bytes, wall time
  problems   every problem: {"shard","class","key","detail"}, class one of
             corrupt, gap, conflict, cursor, missing, io, watermark (a reclaim
             watermark nothing else in the bucket vouches for)`

func runVerify(c *cli, args []string) int {
	f := newFlags("verify", "--bucket URL [--shards LIST | --shard-count N]", verifyAbout)
	bucket := addBucketFlag(f, "the bucket to verify (required)")
	shardsRaw := f.String("shards", "", "comma-separated shard numbers to check (e.g. 0,1,3)")
	count := f.Int("shard-count", 0, "check shards 0..N-1")
	conc := f.Int("concurrency", 0, "objects read at once (default 8)")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	env := c.env()
	url, err := bucket.required(f, env)
	if err != nil {
		return c.fail(err)
	}
	if f.isSet("shards") && f.isSet("shard-count") {
		return c.fail(usagef("--shards and --shard-count exclude each other"))
	}
	vo := coldload.VerifyOptions{Concurrency: *conc}
	if *conc < 0 {
		return c.fail(usagef("--concurrency %d is negative", *conc))
	}
	if f.isSet("shard-count") {
		if *count < 1 || *count > 10000 {
			return c.fail(usagef("--shard-count %d is outside 1..10000", *count))
		}
		vo.ShardCount = *count
	}
	if f.isSet("shards") {
		for _, part := range strings.Split(*shardsRaw, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(part), 10, 32)
			if err != nil || n >= 10000 {
				return c.fail(usagef("--shards %q: %q is not a shard number 0..9999", *shardsRaw, part))
			}
			vo.Shards = append(vo.Shards, uint32(n))
		}
	}
	bk, err := blobtier.Open(c.ctx, url, blobtier.Options{})
	if err != nil {
		return c.fail(fmt.Errorf("%w: %v", bucketlog.ErrUsage, err))
	}
	defer bk.Close()
	// Without --shards or --shard-count, every shard the bucket holds.
	var found []uint32
	discover := len(vo.Shards) == 0 && vo.ShardCount == 0
	if discover {
		if found, err = blobtier.Shards(c.ctx, bk); err != nil {
			return c.fail(err)
		}
		vo.Shards = found
	}
	var rep coldload.VerifyReport
	if !discover || len(found) > 0 {
		rep, err = bucketlog.Verify(c.ctx, url, bk, vo)
	}
	if err == nil {
		// A shard asked for by name or count that holds nothing is a
		// problem, not ok; so is a bucket that holds no shard at all (a
		// wrong bucket or prefix must not look like a clean one).
		for i, sr := range rep.Shards {
			if !sr.Present {
				rep.Shards[i].Problems++
				rep.Problems = append(rep.Problems, coldload.Problem{Shard: sr.Shard, Class: coldload.ProblemMissing,
					Detail: fmt.Sprintf("shard %d has no object in the bucket", sr.Shard)})
			}
		}
		if discover && len(found) == 0 {
			rep.Problems = append(rep.Problems, coldload.Problem{Class: coldload.ProblemMissing,
				Detail: "the bucket holds no object of any shard (a wrong bucket or prefix?)"})
		}
	}
	if rep.Problems == nil {
		rep.Problems = []coldload.Problem{}
	}
	if rep.Shards == nil {
		rep.Shards = []coldload.ShardReport{}
	}
	var foundOut *[]uint32
	if discover {
		foundOut = &found
		if found == nil {
			found = []uint32{}
		}
	}
	shards := make([]verifyShardOutput, 0, len(rep.Shards))
	for _, sr := range rep.Shards {
		shards = append(shards, verifyShardOutput{ShardReport: sr, Base: sr.Base + 1, Watermark: sr.Base})
	}
	out := struct {
		Action string `json:"action"`
		OK     bool   `json:"ok"`
		// ShardsFound is what the bucket holds, when verify discovered
		// the shards (no --shards or --shard-count).
		ShardsFound *[]uint32           `json:"shards_found,omitempty"`
		Shards      []verifyShardOutput `json:"shards"`
		Objects     int                 `json:"objects"`
		Bytes       int64               `json:"bytes"`
		Seconds     float64             `json:"seconds"`
		Problems    []coldload.Problem  `json:"problems"`
	}{"verify", err == nil && rep.OK(), foundOut, shards, rep.Objects, rep.Bytes, rep.Seconds, rep.Problems}
	if err != nil {
		return c.failWith(out, err)
	}
	if !rep.OK() {
		p := rep.Problems[0]
		return c.failWith(out, fmt.Errorf("%w: %d problems found (first: shard %d %s %s: %s)", bucketlog.ErrInvariant, len(rep.Problems), p.Shard, p.Class, p.Key, p.Detail))
	}
	return c.emit(out)
}

const gcAbout = `
Runs one reclaim pass of shard --shard now, as the shard's writer (exit 3
while a server owns it). It is an operator's request: it runs with consumer
interest whatever NOETL_EHDB_EVENTLOG_GC says, plus keep-last-N only when
--max-retained-segments is given. The floor is --min-retained-segments, else
NOETL_EHDB_EVENTLOG_GC_MIN_RETAINED_SEGMENTS, else 2 (the active segment
included). Without consumers and without --max-retained-segments nothing is
reclaimed. On a store that ships (bucket.json), the bucket is required (exit
2 without it) and the pass is the shared reclaim: only segments durable in
the bucket go, the watermark is committed to the bucket first, then the
local segments, then the bucket objects at or below it. Shared reclaim needs
compare-and-swap (S3, GCS): mem:// and file:// buckets are refused (exit 2).

Output (report fields):
  action            "gc"
  shard             the shard
  outcome           "reclaimed" or "noop"
  plan              the plan: policy, tip, boundary, rule (consumer, retention,
                    no_interest), consumer, retention_target, remove (segment ids),
                    remove_bytes, through_segment, through_seq, stop, stop_segment,
                    retained, lags [{"consumer","cursor","lag"}], reason
  local             the local reclaim: through_seq, through_segment, removed, bytes
  shared            with a bucket: watermark_before, adopted, plan, watermark,
                    advanced, local, deleted {"segments","tails","bytes","failed",...}
  segments_before, segments_after   segment files before and after
  base, tip         the first retained and the highest sequence after the pass`

func runGC(c *cli, args []string) int {
	s := newOneShard("gc", "--dir PATH [--shard N] [--bucket URL] [--min-retained-segments N] [--max-retained-segments N]", gcAbout)
	bucket := addBucketFlag(s.f, "the bucket the store ships to (required when it ships)")
	fence := addFencingFlags(s.f, true)
	minKeep := s.f.Int("min-retained-segments", 0, "keep at least this many segments, the active one included (default NOETL_EHDB_EVENTLOG_GC_MIN_RETAINED_SEGMENTS, else 2)")
	maxKeep := s.f.Int("max-retained-segments", 0, "keep-last-N retention: reclaim down to N segments even without consumers, never ahead of one")
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	env, opts, _, err := s.resolve(c)
	if err != nil {
		return c.fail(err)
	}
	if opts.BucketURL, err = bucket.value(s.f, env); err != nil {
		return c.fail(err)
	}
	req := bucketlog.GCRequest{MinRetainedSegments: env.GC.MinRetainedSegments, Sweep: true}
	if s.f.isSet("min-retained-segments") {
		if *minKeep < 1 {
			return c.fail(usagef("--min-retained-segments %d must be at least 1", *minKeep))
		}
		req.MinRetainedSegments = *minKeep
	}
	if s.f.isSet("max-retained-segments") {
		if *maxKeep < 1 {
			return c.fail(usagef("--max-retained-segments %d must be at least 1", *maxKeep))
		}
		req.MaxRetainedSegments = *maxKeep
	}
	// The shard's own periodic GC settings play no part in an explicit pass.
	opts.GC = bucketlog.GCOptions{}
	opts.NoBackground = true
	fence.apply(&opts)
	l, err := bucketlog.Open(c.ctx, opts)
	if err != nil {
		return c.fail(err)
	}
	rep, err := l.GC(c.ctx, req)
	c.closeLog(l)
	out := struct {
		Action string `json:"action"`
		bucketlog.GCReport
	}{"gc", rep}
	if err != nil {
		if rep.Plan.Reason == "" {
			return c.fail(err) // refused before planning: no report to show
		}
		return c.failWith(out, err)
	}
	return c.emit(out)
}

const inspectAbout = `
Describes shard --shard's directory without changing it (no lock, nothing
written; safe while a server owns the shard). Exit 0 when it finds no
corruption — a torn tail is not corruption: it is reported and the owner's
next writable open truncates it — and 5 (storage) when it finds any, with
the report still printed.

Output (report fields):
  action            "inspect"
  dir, exists       the shard directory and whether it exists
  bucket            the bucket recorded in bucket.json (the store ships there)
  tip, base         the highest and the first retained sequence
  segments          [{"id","bytes","frames","events","first_sequence","last_sequence","sealed"}]
  checkpoint        checkpoint.json as found (null when missing)
  reclaim_manifest  reclaim.json as found (null when missing)
  consumers         {"name": cursor}
  torn_tail_bytes, torn_tail_segment   a torn tail the owner would truncate
  problems          every corruption found (segment, offset, what)`

func runInspect(c *cli, args []string) int {
	s := newOneShard("inspect", "[--dir PATH] [--shard N]", inspectAbout)
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	_, opts, n, err := s.resolve(c)
	if err == nil {
		err = existingRoot(opts.Dir)
	}
	if err != nil {
		return c.fail(err)
	}
	dir := bucketlog.ShardDir(opts.Dir, n)
	url, _ := bucketlog.ShipsToBucket(dir)
	rep, err := inspect.Dir(dir, url)
	out := struct {
		Action string `json:"action"`
		inspect.Report
	}{"inspect", rep}
	if err != nil {
		return c.failWith(out, err)
	}
	if len(rep.Problems) > 0 {
		return c.failWith(out, fmt.Errorf("%w: %d problems in %s (first: %s)", localseg.ErrCorrupt, len(rep.Problems), rep.Dir, rep.Problems[0]))
	}
	return c.emit(out)
}
