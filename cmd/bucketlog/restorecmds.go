package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
)

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

--lazy (with --local-retention-bytes N, or BUCKETLOG_LOCAL_RETENTION_BYTES)
downloads only the newest segments within N bytes (at least one), the tail
objects and the cursor object; every older segment stays in the bucket,
recorded as evicted (its length and digest from one metadata read each) and
read from it on demand, verified, once the store runs (serve with a
bucket). The store is appendable at once. stderr says what was downloaded
and what remains remote; the report's "lazy" says it too. When a lazy
restore is not possible (no readable cursor object, a hole, a stale
writer's segment among the older ones, …) it downloads everything and
lazy.full_because says why. The remote segments' event ranges are not
known until first read: an owner's open (serve, or Open not read-only)
reads each remote segment once to learn them before it starts, or is
refused, changing nothing, when the bucket cannot serve one; a read-only
open reads only what it serves.

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
  damaged_tails_skipped  damaged last tail objects skipped: they held only events beyond shipped_through
  damaged_segments_skipped  damaged segment objects passed over: the last one (tail objects held its
                         events through shipped_through) or ones that held no event
  watermark_ahead        why the watermark was unsupported (--allow-watermark-ahead)
  gaps, short            what --allow-partial stepped over
  empty                  the bucket held nothing for the shard (--allow-empty)
  attempts               restarts because the bucket changed while it was read
  zombie_objects         objects skipped as a stale writer's under the lineage rule (see fencing --help)
  lineage                the chain followed: {"epochs","cuts","off_chain","highest_start_segment"}
  highest_segment_id     the highest segment id the bucket listed (bucket ids; next_segment counts restored ids)
  lazy                   --lazy only: {"budget_bytes","full_because","remote_segments","remote_bytes",
                         "remote_first_segment","remote_last_segment","first_local_sequence","metadata_reads",
                         "range_reads","firsts_known"}`

func runRestore(c *cli, args []string) int {
	s := newOneShard("restore", "--bucket URL --dir PATH [--shard N | --all-shards] [--if-not-exists] [--allow-partial] [--allow-empty] [--allow-watermark-ahead] [--lazy --local-retention-bytes N]", restoreAbout)
	bucket := addBucketFlag(s.f, "the bucket to restore from (required)")
	partial := s.f.Bool("allow-partial", false, "keep the contiguous prefix when the bucket's history has a hole or ends short of shipped_through")
	allowEmpty := s.f.Bool("allow-empty", false, "accept a bucket holding nothing of the shard (an empty store)")
	allowAhead := s.f.Bool("allow-watermark-ahead", false, "take a reclaim watermark that nothing else in the bucket vouches for as it is")
	conc := s.f.Int("concurrency", 0, "objects downloaded at once (default 8)")
	allShards := s.f.Bool("all-shards", false, "restore every shard the bucket holds (found by listing it) into DIR/shard-NNNN each")
	ifNotExists := s.f.Bool("if-not-exists", false, "a shard whose directory already holds a store is skipped (exit 0, nothing done), for init containers")
	lazy := s.f.Bool("lazy", false, "download only the newest segments within --local-retention-bytes; the older ones stay in the bucket, read on demand")
	budget := s.f.Int64("local-retention-bytes", 0, "with --lazy: the bytes of the newest segments to download (default BUCKETLOG_LOCAL_RETENTION_BYTES)")
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
	if ro.LazyBytes, err = lazyBudget(c, s.f, *lazy, *budget); err != nil {
		return c.fail(err)
	}
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
// directory already holds a store, which restore would refuse.
func skipRestore(ifNotExists bool, root string, n int) (restoreSkip, bool, error) {
	if !ifNotExists {
		return restoreSkip{}, false, nil
	}
	dir := localseg.ShardDir(root, n)
	// What restore itself refuses as a store already there (localseg.IsStore),
	// a store that lost its segment files but kept its checkpoint included.
	held, err := localseg.IsStore(dir)
	if err != nil {
		return restoreSkip{}, false, fmt.Errorf("%w: %s: %v", bucketlog.ErrInvalidState, dir, err)
	}
	if held {
		return restoreSkip{Action: "restore", Shard: n, Dir: dir, Skipped: true,
			Reason: "the directory already holds a store; nothing done (--if-not-exists)"}, true, nil
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
	for _, key := range rep.DamagedSegments {
		fmt.Fprintf(c.stderr, "restore: shard %d: warning: passed over the damaged segment object %s: tail objects hold its events through shipped_through %d, or it held none\n", n, key, rep.ShippedThrough)
	}
	for _, key := range rep.DamagedTails {
		fmt.Fprintf(c.stderr, "restore: shard %d: warning: skipped the damaged tail object %s: it held only events beyond shipped_through %d (never confirmed in the bucket), which are not restored\n", n, key, rep.ShippedThrough)
	}
	if rep.WatermarkAhead != "" {
		fmt.Fprintf(c.stderr, "restore: shard %d: warning: %s\n", n, rep.WatermarkAhead)
	}
	// The report's counts, which include the watermark and cursor objects
	// the progress callbacks do not count: the line and the JSON agree.
	lastP.Objects, lastP.ObjectsTotal = rep.Objects, max(rep.Objects, lastP.ObjectsTotal)
	lastP.Bytes, lastP.BytesTotal = rep.Bytes, max(rep.Bytes, lastP.BytesTotal)
	fmt.Fprintf(c.stderr, "restore: shard %d: done: %s, sequences %d..%d, %.2fs\n", n, progressLine(lastP), rep.FirstSeq, rep.LastSeq, rep.Seconds)
	if lz := rep.Lazy; lz != nil && lz.FullBecause != "" {
		fmt.Fprintf(c.stderr, "restore: shard %d: lazy: not possible (%s); everything was downloaded\n", n, lz.FullBecause)
	} else if lz != nil {
		fmt.Fprintf(c.stderr, "restore: shard %d: lazy: downloaded %d segments (%d bytes); %d segments (%d bytes, ids %d..%d) remain in the bucket, read on demand: events %d..%d\n",
			n, rep.Segments, rep.SegmentBytes, lz.RemoteSegments, lz.RemoteBytes, lz.RemoteFirstSegment, lz.RemoteLastSegment, rep.Base+1, lz.FirstLocalSeq-1)
	}
	return out, nil
}

// lazyBudget is restore --lazy's budget: the flag, else the environment's
// BUCKETLOG_LOCAL_RETENTION_BYTES; --lazy without one is a usage error.
func lazyBudget(c *cli, f *flagSet, lazy bool, flag int64) (int64, error) {
	if !lazy {
		if f.isSet("local-retention-bytes") {
			return 0, usagef("--local-retention-bytes is for --lazy (a restore otherwise downloads everything)")
		}
		return 0, nil
	}
	if f.isSet("local-retention-bytes") {
		if flag <= 0 {
			return 0, usagef("--local-retention-bytes %d must be positive", flag)
		}
		return flag, nil
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(c.getenv(EnvLocalRetentionBytes)), 10, 64); err == nil && n > 0 {
		return n, nil
	}
	return 0, usagef("--lazy needs --local-retention-bytes N (or %s): the bytes of the newest segments to download", EnvLocalRetentionBytes)
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
