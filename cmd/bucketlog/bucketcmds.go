package main

import (
	"fmt"
	"strconv"
	"strings"

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

const verifyAbout = `
Checks the bucket's objects of the chosen shards without writing anything:
every segment and tail object's length, digest and frames, tail objects
against their keys, segment ids contiguous above the watermark, sequences
continuing across objects, overlapping objects identical, and the cursor
object within what the bucket holds, and the reclaim watermark vouched for
by the other objects. Index objects (derived, never needed to restore) are
checked against their segment objects and counted, never a problem. Without --shards (e.g. 0,1,3) or --shard-count N
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
             unparsed_keys, problems (a count), zombie_objects, lineage and
             highest_segment_id (as restore reports them), index_objects,
             index_objects_usable, index_objects_unusable (keys, each with
             why: a reader ignores it and fetches the segment),
             index_objects_orphaned (at or below the watermark, or with no
             segment object: GC's next sweep deletes them)
  objects, bytes, seconds   objects read, their bytes, wall time
  problems   every problem: {"shard","class","key","detail"}, class one of
             corrupt, gap, conflict, cursor, missing, io, watermark (a reclaim
             watermark nothing else in the bucket vouches for), lineage (the start
             records do not form a chain)`

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
  outcome           "reclaimed", "noop", or "fenced" (a newer owner fenced this
                    writer during the pass: its bucket deletes were refused;
                    exit with the fenced class)
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
