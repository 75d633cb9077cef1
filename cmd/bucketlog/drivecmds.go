package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/internal/drives"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	register(command{name: "durable-eventlog-recovery", group: groupDrive, run: runRecoveryDrive,
		summary: "append, ack, restart: zero loss, ordering, scope, payloads, cursor"})
	register(command{name: "durable-eventlog-affinity", group: groupDrive, run: runAffinityDrive,
		summary: "the single-writer drive over a pool of replicas sharing one root"})
	register(command{name: "durable-eventlog-affinity-append", group: groupDrive, run: runAffinityAppend,
		summary: "one routed append by one replica (exit 6 when refused)"})
	register(command{name: "durable-eventlog-affinity-read", group: groupDrive, run: runAffinityRead,
		summary: "one routed read by one replica (served_by owner_resident or non_owner_cold_load)"})
	register(command{name: "durable-eventlog-gc", group: groupDrive, run: runGCDrive,
		summary: "append, ack 3/4, reclaim: bounded growth, gapless from the base, restart"})
	register(command{name: "durable-eventlog-shared-gc", group: groupDrive, run: runSharedGCDrive,
		summary: "a pool over one bucket reclaims a shard locally and in the bucket, coherently"})
	register(command{name: "durable-eventlog-shared", group: groupDrive, run: runSharedDrive,
		summary: "a pool over one bucket: owner publish, non-owner cold load, crash recovery, miss, parity"})
}

// driveOutcome prints a drive's report: exit 0 when it holds, 1 (with
// "error" and "class":"invariant" added) when it does not.
func (c *cli) driveOutcome(report any, holds bool, divergence *string) int {
	if holds {
		return c.emit(report)
	}
	why := "a check failed"
	if divergence != nil {
		why = *divergence
	}
	return c.failWith(report, fmt.Errorf("%w: the drive does not hold: %s", bucketlog.ErrInvariant, why))
}

// driveRoot adds --root (alias --dir), which every drive requires.
type driveRoot struct{ root, dir string }

func addDriveRoot(f *flagSet, what string) *driveRoot {
	r := &driveRoot{}
	f.StringVar(&r.root, "root", "", what)
	f.StringVar(&r.dir, "dir", "", "alias of --root")
	return r
}

func (r *driveRoot) value(f *flagSet) (string, error) {
	if !f.isSet("root") && !f.isSet("dir") {
		return "", usagef("missing required flag --root (bucketlog %s --help)", f.name)
	}
	return dirFlag(f, r.dir, r.root, "")
}

const freshRoot = "a fresh directory for the drive (required; it must not exist or be empty)"

const recoveryAbout = `
On a fresh --root, appends a deterministic set of events over two executions
to shard 0 (ROOT/shard-0000), pulls and acks the first one for --consumer,
closes the store, opens a fresh one over the same directory (a restart), and
checks zero loss, gapless ordering, per-execution scope, byte-identical
payloads and the consumer's cursor. Exit 0 when it holds, 1 when it does not,
2 when it refuses its input (a used root, a bad consumer name). Output:
  {"driver":"ehdb-durable-segment","recovered":true,
   "report":{"appended","zero_loss","ordering_ok","scope_ok","payloads_match",
   "cursor_survived","pending_after_restart","divergence"}}`

func runRecoveryDrive(c *cli, args []string) int {
	f := newFlags("durable-eventlog-recovery", "--root DIR [--consumer C]", recoveryAbout)
	root := addDriveRoot(f, freshRoot)
	consumer := f.String("consumer", drives.DefaultRecoveryConsumer, "the consumer that acks")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	dir, err := root.value(f)
	if err != nil {
		return c.fail(err)
	}
	rep, err := drives.Recovery(dir, *consumer)
	if err != nil {
		return c.fail(err)
	}
	return c.driveOutcome(rep, rep.Holds(), rep.Report.Divergence)
}

const affinityAbout = `
On a fresh --root, opens a pool of --shard-count replicas (replica i owns
shard i), routes a deterministic execution set through every replica, and
checks that owners write, non-owners are refused with nothing left behind,
every execution has exactly one owner and every shard only its own data,
non-owner reads are cold loads that change nothing, and a restart that loses
every checkpoint recovers each shard. Exit 0 when it holds, 1 when it does
not, 2 when it refuses (fewer than 2 shards, a used root). Output:
  {"single_writer_holds":true,"report":{"shard_count","executions","owner_appends",
   "nonowner_refusals","owner_writes_ok","nonowner_refused_ok",
   "single_writer_invariant","coldload_read_ok","crash_recovery_ok","divergence"}}`

func runAffinityDrive(c *cli, args []string) int {
	f := newFlags("durable-eventlog-affinity", "--root DIR [--shard-count N]", affinityAbout)
	root := addDriveRoot(f, freshRoot)
	n := f.Int("shard-count", 2, fmt.Sprintf("replicas in the pool, 2 to %d", drives.MaxAffinityShards))
	if stop, code := c.parse(f, args); stop {
		return code
	}
	dir, err := root.value(f)
	if err != nil {
		return c.fail(err)
	}
	rep, err := drives.Affinity(dir, *n)
	if err != nil {
		return c.fail(err)
	}
	return c.driveOutcome(rep, rep.Holds(), rep.Report.Divergence)
}

const affinityAppendAbout = `
One routed append by the replica that owns --shard-index of --shard-count
under --root (it opens its own shard writable: exit 3 while another process
holds it). When the replica owns the execution it appends (exit 0); when it
does not, nothing is written and the command exits 6 with the owner shard.
Output:
  {"action":"eventlog-append","execution_id","global_sequence","byte_len",
   "created_stream","log_record_count","decision","shard_index","shard_count",
   "owner_shard"}
decision is "owned" or "not_owner" (then global_sequence and log_record_count
are null, and "error" and "class":"not_owner" are added).`

func runAffinityAppend(c *cli, args []string) int {
	f := newFlags("durable-eventlog-affinity-append", "--root DIR --shard-index N --shard-count N --execution-id ID --transaction-id ID --payload TEXT", affinityAppendAbout)
	root := addDriveRoot(f, "the pool's root directory (required)")
	route := addRouteFlags(f)
	execID := f.String("execution-id", "", "the execution `ID` (required)")
	txnID := f.String("transaction-id", "", "the transaction `ID` (required)")
	payload := f.String("payload", "", "the payload `TEXT` (required)")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	dir, err := root.value(f)
	if err == nil {
		err = requireFlags(f, "execution-id", "transaction-id", "payload")
	}
	if err != nil {
		return c.fail(err)
	}
	own, err := route.ownership(f, c.env())
	if err != nil {
		return c.fail(err)
	}
	ev, err := checkEvent(localseg.Event{ExecutionID: *execID, TransactionID: *txnID, Payload: *payload}, localseg.DefaultSegmentMaxBytes)
	if err != nil {
		return c.fail(err)
	}
	out, err := drives.AffinityAppend(dir, own, ev)
	if err != nil {
		return c.fail(err)
	}
	if out.Refused() {
		return c.failWith(out, out.NotOwner())
	}
	return c.emit(out)
}

const affinityReadAbout = `
One routed read by the replica that owns --shard-index of --shard-count under
--root: the owner serves the execution from its shard ("served_by":
"owner_resident"), any other replica cold-loads the owner's shard read-only
("non_owner_cold_load"), changing nothing. Output:
  {"action":"eventlog-read-exec","execution_id","exists","base","clamped",
   "record_count","returned","records":[…],"served_by","shard_index",
   "shard_count","owner_shard"}`

func runAffinityRead(c *cli, args []string) int {
	f := newFlags("durable-eventlog-affinity-read", "--root DIR --shard-index N --shard-count N --execution-id ID [--after N] [--limit N]", affinityReadAbout)
	root := addDriveRoot(f, "the pool's root directory (required)")
	route := addRouteFlags(f)
	execID := f.String("execution-id", "", "the execution `ID` (required)")
	page := addPageFlags(f)
	if stop, code := c.parse(f, args); stop {
		return code
	}
	dir, err := root.value(f)
	if err == nil {
		err = requireFlags(f, "execution-id")
	}
	if err == nil {
		err = page.check()
	}
	if err != nil {
		return c.fail(err)
	}
	own, err := route.ownership(f, c.env())
	if err != nil {
		return c.fail(err)
	}
	id, err := checkName("execution_id", *execID)
	if err != nil {
		return c.fail(err)
	}
	out, err := drives.AffinityRead(dir, own, id, page.after, page.limit)
	if err != nil {
		return c.fail(err)
	}
	return c.emit(out)
}

const gcDriveAbout = `
On a fresh --root, appends --events events to shard 0 with small segments,
acks --consumer through about three quarters of the log, runs one GC pass
with the --min-retained-segments floor, and checks that growth was bounded,
the retained log is gapless from the base with zero loss, a read below the
base says "reclaimed", and a restart recovers. Exit 0 when it holds, 1 when
it does not, 2 when it refuses (fewer than 8 events, a used root). Output:
  {"driver":"bucketlog-durable-segment","gc_holds":true,"report":{"events",
   "segment_max_bytes","min_retained_segments","consumer","acked_through",
   "segments_before","segments_after","bytes_before","bytes_after",
   "reclaimed_segments","reclaimed_through_seq","reclaimed_through_segment",
   "retained_records","plan_reason","growth_bounded","floor_holds",
   "gapless_from_base","zero_loss","reclaimed_reports_reclaimed",
   "restart_recovers","divergence"}}`

func runGCDrive(c *cli, args []string) int {
	f := newFlags("durable-eventlog-gc", "--root DIR [--events N] [--segment-max-bytes N] [--min-retained-segments N] [--consumer C]", gcDriveAbout)
	root := addDriveRoot(f, freshRoot)
	events := f.Int("events", 40, fmt.Sprintf("events to append, %d to %d", drives.MinGCDriveEvents, drives.MaxGCDriveEvents))
	segMax := f.Int64("segment-max-bytes", drives.DefaultGCDriveSegmentBytes, "the drive's segment size")
	minKeep := f.Int("min-retained-segments", 2, "the floor of segments kept")
	consumer := f.String("consumer", drives.DefaultGCDriveConsumer, "the consumer that acks")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	dir, err := root.value(f)
	if err != nil {
		return c.fail(err)
	}
	if *segMax < 1 || *segMax > localseg.MaxSegmentBytes {
		return c.fail(usagef("--segment-max-bytes %d is outside 1..%d", *segMax, localseg.MaxSegmentBytes))
	}
	if _, err := checkName("consumer", *consumer); err != nil {
		return c.fail(usagef("--consumer: %v", err))
	}
	rep, err := drives.DriveGC(dir, *events, *segMax, *minKeep, *consumer)
	if err != nil {
		return c.fail(err)
	}
	return c.driveOutcome(rep, rep.Holds(), rep.Report.Divergence)
}

// driveBucket opens --bucket, or a fresh in-memory bucket with conditional
// writes (memcas: the command links no emulator; the drives' tests run them
// on the S3 and GCS emulators through --bucket). close releases it.
func (c *cli) driveBucket(f *flagSet, url string) (b blobtier.Bucket, close func(), err error) {
	if f.isSet("bucket") {
		url = strings.TrimSpace(url)
		if url == "" {
			return nil, nil, usagef("--bucket is empty")
		}
		b, err := blobtier.Open(c.ctx, url, blobtier.Options{})
		if err != nil {
			return nil, nil, usagef("%v", err)
		}
		return b, func() { b.Close() }, nil
	}
	b = blobtier.New(memcas.OpenBucket(time.Now), blobtier.Options{})
	return b, func() { b.Close() }, nil
}

const sharedGCAbout = `
A pool of --shard-count replicas, each with its own local disk under --root,
ships its shard to one bucket; shard 0's owner has a consumer ack three
quarters of its log and runs one shared reclaim. Checks that the owner's
retained log is gapless from its base, that a non-owner's cold load and a
fresh new owner's hydrate both hold exactly the owner's retained set, that
the bucket lost exactly shard 0's objects at or below the watermark and
nothing of the other shards, and that a second pass is a no-op. The bucket
is --bucket (it must compare-and-swap: S3 or GCS; mem:// and file:// are
refused, exit 2), or by default a fresh bucket in this process's memory
with conditional writes. Exit 0 when it holds, 1 when it does not, 2 when
it refuses.
Output:
  {"driver":"bucketlog-durable-segment","shared_gc_holds":true,"report":{
   "shard_count","events_per_shard","consumer","acked_through",
   "shared_objects_before","shared_objects_after","watermark_seq",
   "watermark_segment","owner_base","owner_retained","plan_reason",
   "owner_gapless","non_owner_coherent","new_owner_coherent","pruned",
   "other_shards_untouched","second_pass_noop","divergence"}}`

func runSharedGCDrive(c *cli, args []string) int {
	return runPoolDrive(c, args, "durable-eventlog-shared-gc", sharedGCAbout, "the shared GC drive", drives.MaxSharedGCDriveShards,
		func(dir string, n int, b blobtier.Bucket) (any, bool, *string, error) {
			rep, err := drives.DriveSharedGC(dir, n, b)
			return rep, rep.Holds(), rep.Report.Divergence, err
		})
}

// runPoolDrive runs a drive over a pool of --shard-count replicas (2 to
// maxShards) sharing one bucket (--bucket, or a fresh in-memory one): the
// pool is checked before a bucket is opened for it.
func runPoolDrive(c *cli, args []string, name, about, what string, maxShards int,
	drive func(dir string, n int, b blobtier.Bucket) (report any, holds bool, divergence *string, err error)) int {
	f := newFlags(name, "--root DIR [--shard-count N] [--bucket URL]", about)
	root := addDriveRoot(f, freshRoot)
	n := f.Int("shard-count", 2, fmt.Sprintf("replicas in the pool, 2 to %d", maxShards))
	url := f.String("bucket", "", "the bucket `URL` (default: a fresh in-memory bucket with conditional writes)")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	dir, err := root.value(f)
	if err != nil {
		return c.fail(err)
	}
	if *n < 2 || *n > maxShards {
		return c.fail(usagef("%s needs 2 to %d shards, got %d", what, maxShards, *n))
	}
	b, closeB, err := c.driveBucket(f, *url)
	if err != nil {
		return c.fail(err)
	}
	defer closeB()
	rep, holds, divergence, err := drive(dir, *n, b)
	if err != nil {
		return c.fail(err)
	}
	return c.driveOutcome(rep, holds, divergence)
}

const sharedAbout = `
A pool of --shard-count replicas, each the single owner of one shard with a
local disk of its own (ROOT/replica-<i>), over one bucket. Proves: shared
miss (before anything ships, a non-owner read of another shard is an empty
cold load, not an error); owner publish (each owner ships with its active
segment sealed, appends more and ships the tail, so the bucket holds every
sealed segment byte for byte and the tail through the tip); non-owner cold
load from the bucket (every other replica reads each execution with
served_by non_owner_cold_load and gets every event); parity (each cold-loaded
page equals the owner's); crash recovery from the bucket (each owner's local
directory is deleted and the engine reopened over the empty one: it hydrates,
keeps its consumer's cursor and continues the sequence). The bucket is
--bucket (it must hold nothing of the pool's shards) or by default a fresh
bucket in this process's memory with conditional writes. Exit 0 when it
holds, 1 when it does not, 2 when it refuses (fewer than 2 shards, a used
root or bucket).
Output:
  {"shared_tier_holds":true,"report":{"shard_count","executions",
   "shared_segments","owner_published_ok","nonowner_coldload_from_shared_ok",
   "crash_recovery_from_shared_ok","shared_miss_ok","parity_ok","divergence"}}`

func runSharedDrive(c *cli, args []string) int {
	return runPoolDrive(c, args, "durable-eventlog-shared", sharedAbout, "the shared drive", drives.MaxSharedShards,
		func(dir string, n int, b blobtier.Bucket) (any, bool, *string, error) {
			rep, err := drives.Shared(dir, n, b)
			return rep, rep.Holds(), rep.Report.Divergence, err
		})
}
