package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	register(command{name: "selfcheck", group: groupServer, run: runSelfcheck,
		summary: "selfcheck config: the resolved configuration (secret-free); selfcheck durable-eventlog: append and replay"})
}

const selfcheckAbout = `
Two checks, named by the first argument:

bucketlog selfcheck config [flags]
  Prints the configuration every axis resolves to — the environment
  (NOETL_EHDB_*, NOETL_SHARD_INDEX/COUNT, BUCKETLOG_BUCKET_URL), then the
  flags — as serve would use it, without opening any store or contacting the
  bucket. Output:
    {"suite":"bucketlog-config-selfcheck","storage_backend","authoritative",
     "dir","bucket_url","bucket_configured","bucket_url_ok","bucket_url_error",
     "shard_index","shard_count","segment_max_bytes","seal_max_age",
     "tail_replication","tail_interval","loss_window","tail_cleanup",
     "sync_to_bucket","gc":{"enabled","interval","min_retained_segments",
     "max_retained_segments","policy"},"warnings":[…],"secret_free":true}
  bucket_url has its credentials and secret query parameters replaced by
  REDACTED; bucket_url_ok says whether the URL opens (the scheme is known and
  the credentials it needs are present; no request is sent). A partial or
  invalid shard pair is a usage error (exit 2), printed with the rest.

bucketlog selfcheck durable-eventlog [--dir PATH] [flags]
  Appends 3 events through the configured backend to the configured shard,
  closes it, reopens it READ-ONLY and proves the 3 events replay from the
  durable segments with their exact payloads. Without --dir it works in a
  temporary directory that is removed afterwards, so it never touches a live
  shard; with --dir it appends 3 real events (execution ids owned by the
  shard, transaction ids "selfcheck-…") to that shard, and fails with exit 3
  while a server holds the shard's lock. It never writes to a bucket (a
  temporary shard shipping there would be a second writer). Output:
    {"suite":"ehdb-durable-eventlog-selfcheck","storage_backend","dir",
     "shard","shard_count","appended","first_sequence","last_sequence",
     "durable_replay_records","durable_replay_ok","ok"}
  durable_replay_records counts every event the read-only reopen replayed
  (the whole shard with --dir). Exit 0 only when ok; 1 (invariant) when the
  replay does not hold the appends; 5 (storage) when it finds corruption. The local_reference backend is not
  durable: the check reports ok false for it.`

func runSelfcheck(c *cli, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "config":
			return runSelfcheckConfig(c, args[1:])
		case "durable-eventlog":
			return runSelfcheckDurable(c, args[1:], nil)
		}
	}
	f := newFlags("selfcheck", "(config | durable-eventlog) [flags]", selfcheckAbout)
	if stop, code := c.parse(f, args); stop {
		return code
	}
	return c.fail(usagef("selfcheck needs a check: config or durable-eventlog (bucketlog selfcheck --help)"))
}

// gcOutput is the GC axis of selfcheck config.
type gcOutput struct {
	Enabled             bool   `json:"enabled"`
	Interval            string `json:"interval"`
	MinRetainedSegments int    `json:"min_retained_segments"`
	MaxRetainedSegments int    `json:"max_retained_segments"`
	Policy              string `json:"policy"`
}

// configOutput is selfcheck config's answer.
type configOutput struct {
	Suite            string   `json:"suite"`
	Backend          string   `json:"storage_backend"`
	Authoritative    bool     `json:"authoritative"`
	Dir              string   `json:"dir"`
	BucketURL        string   `json:"bucket_url"`
	BucketConfigured bool     `json:"bucket_configured"`
	BucketURLOK      bool     `json:"bucket_url_ok"`
	BucketURLError   string   `json:"bucket_url_error,omitempty"`
	ShardIndex       int      `json:"shard_index"`
	ShardCount       int      `json:"shard_count"`
	SegmentMaxBytes  int64    `json:"segment_max_bytes"`
	SealMaxAge       string   `json:"seal_max_age"`
	TailReplication  bool     `json:"tail_replication"`
	TailInterval     string   `json:"tail_interval"`
	LossWindow       string   `json:"loss_window"`
	TailCleanup      bool     `json:"tail_cleanup"`
	SyncToBucket     bool     `json:"sync_to_bucket"`
	GC               gcOutput `json:"gc"`
	Warnings         []string `json:"warnings"`
	SecretFree       bool     `json:"secret_free"`
}

func runSelfcheckConfig(c *cli, args []string) int {
	f := newFlags("selfcheck config", "[--dir PATH] [--shard-index N --shard-count N] [--bucket URL] [flags]", selfcheckAbout)
	store := addStoreFlags(f)
	route := addRouteFlags(f)
	bucket := addBucketFlag(f, "the bucket the shard ships to")
	tailInterval := f.Duration("tail-interval", 0, "tail replication tick (default NOETL_EHDB_TAIL_INTERVAL_SECS, else 15s)")
	sync := f.Bool("sync-to-bucket", false, "synchronous mode, as serve --sync-to-bucket")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	env := c.env()
	opts := c.options(env)
	out := configOutput{Suite: "bucketlog-config-selfcheck", Backend: env.Backend, Warnings: append([]string{}, env.Warnings...)}
	var errs []error
	if err := store.apply(f, &opts); err != nil {
		errs = append(errs, err)
	}
	own, err := route.ownership(f, env)
	if err != nil {
		errs = append(errs, err)
	}
	opts.ShardIndex, opts.ShardCount = own.Index, own.Count
	if opts.BucketURL, err = bucket.value(f, env); err != nil {
		errs = append(errs, err)
	}
	if f.isSet("tail-interval") {
		if *tailInterval < minTailInterval {
			errs = append(errs, usagef("--tail-interval %v is below the minimum %v (a shorter tick spins a core on an idle shard)", *tailInterval, minTailInterval))
		} else {
			opts.TailInterval = *tailInterval
		}
	}
	out.Authoritative = env.Backend == BackendDurableSegment
	if !out.Authoritative {
		out.Warnings = append(out.Warnings, "the local_reference backend is not production durable and never ships: it is for parity tests and migration")
	}
	out.Dir = opts.Dir
	out.ShardIndex, out.ShardCount = opts.ShardIndex, opts.ShardCount
	out.SegmentMaxBytes = segMax(opts)
	switch {
	case opts.SealMaxAge < 0:
		out.SealMaxAge = "never"
	case opts.SealMaxAge == 0:
		out.SealMaxAge = bucketlog.DefaultSealMaxAge.String()
	default:
		out.SealMaxAge = opts.SealMaxAge.String()
	}
	ti := opts.TailInterval
	if ti <= 0 {
		ti = bucketlog.DefaultTailInterval
	}
	out.TailInterval = ti.String()
	out.TailCleanup = !opts.DisableTailCleanup
	if opts.BucketURL != "" {
		out.BucketConfigured = true
		out.BucketURL = blobtier.Redact(opts.BucketURL)
		out.TailReplication = !opts.DisableTailReplication && out.Authoritative
		if b, err := blobtier.Open(c.ctx, opts.BucketURL, blobtier.Options{}); err != nil {
			// An *OpenError names the URL redacted and strips the secrets
			// from its message; anything else is redacted here.
			var oe *blobtier.OpenError
			msg := "the URL does not open"
			if errors.As(err, &oe) {
				msg = oe.Error()
			}
			out.BucketURLError = msg
		} else {
			out.BucketURLOK = true
			b.Close()
		}
	}
	switch {
	case !out.BucketConfigured:
		out.LossWindow = "no bucket: the local disk is the only copy (each append is fsync'd before it returns)"
	case !out.TailReplication:
		out.LossWindow = "tail replication off: events of the unsealed segment reach the bucket only when it seals (seal_max_age) or at a clean shutdown"
	case *sync:
		out.SyncToBucket = true
		out.LossWindow = "none for acknowledged appends: each append returns once the bucket holds it (or answers not_in_bucket)"
	default:
		out.LossWindow = fmt.Sprintf("%s: an event appended just after a tail tick exists only on the local disk until the next tick ships it", ti)
	}
	if *sync && !out.BucketConfigured {
		errs = append(errs, usagef("--sync-to-bucket needs a bucket (--bucket or BUCKETLOG_BUCKET_URL)"))
	}
	g := opts.GC
	out.GC = gcOutput{Enabled: g.Enabled, Interval: g.Interval.String(), MinRetainedSegments: g.MinRetainedSegments, MaxRetainedSegments: g.MaxRetainedSegments}
	if g.MinRetainedSegments <= 0 {
		out.GC.MinRetainedSegments = bucketlog.DefaultMinRetainedSegments
	}
	switch {
	case !g.Enabled || g.Interval <= 0:
		out.GC.Policy = "off: no periodic reclaim (an explicit gc command still reclaims what consumers have acked)"
	case g.MaxRetainedSegments > 0:
		out.GC.Policy = fmt.Sprintf("every %s: reclaim what every consumer has acked, and keep at most the last %d segments (at least %d)", g.Interval, g.MaxRetainedSegments, out.GC.MinRetainedSegments)
	default:
		out.GC.Policy = fmt.Sprintf("every %s: reclaim what every durable consumer has acked (no consumer: nothing), keeping at least %d segments", g.Interval, out.GC.MinRetainedSegments)
	}
	out.SecretFree = true
	if err := errors.Join(errs...); err != nil {
		return c.failWith(out, err)
	}
	return c.emit(out)
}

// durableOutput is selfcheck durable-eventlog's answer.
type durableOutput struct {
	Suite         string `json:"suite"`
	Backend       string `json:"storage_backend"`
	Dir           string `json:"dir"`
	Shard         int    `json:"shard"`
	ShardCount    int    `json:"shard_count"`
	Appended      int    `json:"appended"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
	ReplayRecords int    `json:"durable_replay_records"`
	ReplayOK      bool   `json:"durable_replay_ok"`
	OK            bool   `json:"ok"`
	Problem       string `json:"problem,omitempty"`
	temporary     bool
}

// selfcheckEvents is how many events the durable check appends.
const selfcheckEvents = 3

// runSelfcheckDurable runs the check; beforeReplay, for tests, runs on the
// shard directory between the close and the read-only reopen.
func runSelfcheckDurable(c *cli, args []string, beforeReplay func(shardDir string) error) int {
	f := newFlags("selfcheck durable-eventlog", "[--dir PATH] [--shard-index N --shard-count N] [--segment-max-bytes N]", selfcheckAbout)
	store := addStoreFlags(f)
	route := addRouteFlags(f)
	if stop, code := c.parse(f, args); stop {
		return code
	}
	env := c.env()
	opts := c.options(env)
	out := durableOutput{Suite: "ehdb-durable-eventlog-selfcheck", Backend: env.Backend}
	explicit := f.isSet("dir") || f.isSet("root")
	if err := store.apply(f, &opts); err != nil {
		return c.fail(err)
	}
	own, err := route.ownership(f, env)
	if err != nil {
		return c.fail(err)
	}
	opts.ShardIndex, opts.ShardCount = own.Index, own.Count
	out.Shard, out.ShardCount = own.Index, own.Count
	if !explicit {
		tmp, err := os.MkdirTemp("", "bucketlog-selfcheck-")
		if err != nil {
			return c.fail(err)
		}
		defer os.RemoveAll(tmp)
		opts.Dir, out.temporary = tmp, true
	}
	out.Dir = opts.Dir
	if out.temporary {
		out.Dir = "(temporary, removed)"
	}
	if !backendOf(env).durable() {
		out.Problem = "the local_reference backend (NOETL_EHDB_EVENTLOG_BACKEND) is not durable: there are no durable segments to replay"
		return c.failWith(out, fmt.Errorf("%w: %s", bucketlog.ErrInvariant, out.Problem))
	}
	// The check never ships: a bucket from the environment is ignored.
	opts.BucketURL, opts.NoBackground = "", true
	if err := durableSelfcheck(c.ctx, opts, own, &out, beforeReplay); err != nil {
		return c.failWith(out, err)
	}
	return c.emit(out)
}

// durableSelfcheck appends, closes, reopens read-only and compares.
func durableSelfcheck(ctx context.Context, opts bucketlog.Options, own affinity.Ownership, out *durableOutput, beforeReplay func(string) error) error {
	l, err := bucketlog.Open(ctx, opts)
	if err != nil {
		return err
	}
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	var sent []localseg.Event
	for i := range selfcheckEvents {
		exec := selfcheckExecution(own, i)
		ev := localseg.Event{ExecutionID: exec, TransactionID: fmt.Sprintf("selfcheck-%s-%d", stamp, i+1),
			Payload: fmt.Sprintf(`{"selfcheck":%q,"n":%d,"text":"durable <replay> & é ✓"}`, stamp, i+1)}
		res, err := l.Append(ctx, ev)
		if err != nil {
			l.Close()
			return fmt.Errorf("selfcheck append %d: %w", i+1, err)
		}
		if i == 0 {
			out.FirstSequence = res.Seq
		}
		out.LastSequence = res.Seq
		out.Appended++
		sent = append(sent, ev)
	}
	dir := l.Dir()
	if err := l.Close(); err != nil {
		return fmt.Errorf("selfcheck close: %w", err)
	}
	if beforeReplay != nil {
		if err := beforeReplay(dir); err != nil {
			return err
		}
	}

	// An independent read-only open replays the segments from disk.
	ro := opts
	ro.ReadOnly, ro.NoBackground = true, false
	r, err := bucketlog.Open(ctx, ro)
	if err != nil {
		out.Problem = fmt.Sprintf("the read-only reopen failed: %v", err)
		return fmt.Errorf("%w: %s", bucketlog.ErrInvariant, out.Problem)
	}
	defer r.Close()
	// A replay that finds corruption fails with its own class (storage,
	// exit 5), naming the segment and offset.
	all, err := r.Scan(ctx, 0, 0)
	if err != nil {
		out.Problem = fmt.Sprintf("the replay failed: %v", err)
		return err
	}
	out.ReplayRecords = int(all.RecordCount)
	page, err := r.Scan(ctx, out.FirstSequence-1, selfcheckEvents+1)
	if err != nil {
		out.Problem = fmt.Sprintf("the replay failed: %v", err)
		return err
	}
	var problems []string
	if len(page.Records) != len(sent) {
		problems = append(problems, fmt.Sprintf("the replay holds %d events from sequence %d on, %d were appended", len(page.Records), out.FirstSequence, len(sent)))
	}
	for i, rec := range page.Records {
		if i >= len(sent) {
			break
		}
		ev := sent[i]
		if rec.Seq != out.FirstSequence+uint64(i) || rec.ExecutionID != ev.ExecutionID || rec.TransactionID != ev.TransactionID || rec.Payload != ev.Payload {
			problems = append(problems, fmt.Sprintf("sequence %d replayed differently from what was appended", out.FirstSequence+uint64(i)))
		}
	}
	out.ReplayOK = len(problems) == 0
	out.OK = out.ReplayOK
	if !out.OK {
		out.Problem = strings.Join(problems, "; ")
		return fmt.Errorf("%w: %s", bucketlog.ErrInvariant, out.Problem)
	}
	return nil
}

// selfcheckExecution is the i-th execution id the shard owns, named so an
// operator recognises it in a live shard.
func selfcheckExecution(own affinity.Ownership, i int) string {
	for n := 0; ; n++ {
		id := fmt.Sprintf("selfcheck-%d-%d", i, n)
		if own.OwnerOf(id) == own.Index {
			return id
		}
	}
}
