package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// Page limits of scan, read and tail: the default and the largest page.
const (
	defaultLimit = 1000
	maxLimit     = 100000
)

// flagSet is one command's flags: the standard library's FlagSet (which
// accepts --name and -name alike) plus the help text.
type flagSet struct {
	*flag.FlagSet
	name     string
	synopsis string // the flags on the usage line
	about    string // what the command does and what it prints

	// help is --help (or -h): a real bool flag, so --help=false is no
	// request for help.
	help bool
	// logLevel and logFormat are --log-level and --log-format, which every
	// command takes.
	logLevel, logFormat string
}

// Minimum intervals: a smaller tick would spin a core on an idle shard
// (or, for --seal-max-age, seal a segment per tick). Below them a flag is a
// usage error, never silently raised.
const (
	minTailInterval = 10 * time.Millisecond
	minSealMaxAge   = time.Second
)

// newFlags starts a command's flag set. The parser never prints or exits by
// itself: parse reports errors as doc.go describes under Errors.
func newFlags(name, synopsis, about string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := &flagSet{FlagSet: fs, name: name, synopsis: synopsis, about: about}
	fs.BoolVar(&f.help, "help", false, "print this help and exit 0")
	fs.BoolVar(&f.help, "h", false, "print this help and exit 0")
	fs.StringVar(&f.logLevel, "log-level", "", "stderr log level: debug, info, warn or error (default warn; serve: info)")
	fs.StringVar(&f.logFormat, "log-format", "text", "stderr log format: text or json")
	return f
}

// isSet reports whether the command line gave the flag.
func (f *flagSet) isSet(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			set = true
		}
	})
	return set
}

// usage writes the command's help.
func (f *flagSet) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: bucketlog %s %s\n\n%s\n", f.name, f.synopsis, strings.TrimSpace(f.about))
	fmt.Fprintf(w, "\nFlags:\n")
	f.VisitAll(func(fl *flag.Flag) {
		if fl.Name == "help" || fl.Name == "h" {
			return // listed last, below
		}
		kind, text := flag.UnquoteUsage(fl)
		line := "  --" + fl.Name
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintf(w, "%s\n      %s", line, text)
		if d := fl.DefValue; d != "" && d != "0" && d != "false" && d != "0s" {
			fmt.Fprintf(w, " (default %s)", d)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "  --help\n      print this help and exit 0\n\n%s", exitCodesHelp)
}

// parse parses args into f. stop is true when the command must return
// code: after --help (0, the help on stdout) or a flag error (usage, 2,
// reported). Positional arguments are refused: every input is a flag.
func (c *cli) parse(f *flagSet, args []string) (stop bool, code int) {
	err := f.Parse(args)
	switch {
	case err == nil && f.help, errors.Is(err, flag.ErrHelp):
		f.usage(c.stdout)
		return true, 0
	case err != nil:
		return true, c.fail(usagef("%v (bucketlog %s --help lists the flags)", err, f.name))
	case f.NArg() > 0:
		return true, c.fail(usagef("unexpected argument %q: every input is a flag (bucketlog %s --help lists them)", f.Arg(0), f.name))
	}
	if err := c.setLogging(f); err != nil {
		return true, c.fail(err)
	}
	return false, 0
}

// setLogging applies --log-level and --log-format to c.log (and to the
// logger serve makes with c.logger).
func (c *cli) setLogging(f *flagSet) error {
	switch f.logFormat {
	case "text", "json":
		c.logJSON = f.logFormat == "json"
	default:
		return usagef("--log-format %q is not text or json", f.logFormat)
	}
	if f.isSet("log-level") {
		var l slog.Level
		if err := l.UnmarshalText([]byte(f.logLevel)); err != nil || !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(f.logLevel)) {
			return usagef("--log-level %q is not debug, info, warn or error", f.logLevel)
		}
		c.logLevel = &l
	}
	c.log = c.logger(slog.LevelWarn)
	return nil
}

// logger is a stderr logger at --log-level, or at def when the flag is not
// given, in --log-format.
func (c *cli) logger(def slog.Level) *slog.Logger {
	level := def
	if c.logLevel != nil {
		level = *c.logLevel
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.logJSON {
		return slog.New(slog.NewJSONHandler(c.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(c.stderr, opts))
}

// envConfig is the configuration the environment gives (doc.go, Configuration), read
// once per command. shardErr is a partial or invalid NOETL_SHARD_INDEX /
// NOETL_SHARD_COUNT pair: an error for the commands that take their shard
// from it, and overridden by flags that give the shard.
type envConfig struct {
	Config
	shardErr error
}

// env reads the environment. Ignored values are logged on stderr as
// warnings, never printed on stdout.
func (c *cli) env() envConfig {
	cfg, err := ConfigFromEnv(c.getenv)
	for _, w := range cfg.Warnings {
		c.log.Warn("environment value ignored", "warning", w)
	}
	return envConfig{Config: cfg, shardErr: err}
}

// options are the engine options the environment gives; flags then
// override them.
func (c *cli) options(env envConfig) bucketlog.Options {
	var o bucketlog.Options
	env.Apply(&o)
	o.Logger = c.log
	return o
}

// storeFlags are the store flags: --dir (alias --root), --segment-max-bytes, --seal-max-age.
type storeFlags struct {
	dir, root string
	segMax    int64
	sealAge   time.Duration
}

// shardOptions resolves the engine options of a command that opens its
// owned shard: the environment's, then the store flags, the shard pair (also
// returned), the bucket and --tail-interval (when set; it must be positive).
func (c *cli) shardOptions(f *flagSet, env envConfig, store *storeFlags, route *routeFlags, bucket *bucketFlag, tailInterval *time.Duration) (bucketlog.Options, affinity.Ownership, error) {
	opts := c.options(env)
	if err := store.apply(f, &opts); err != nil {
		return opts, affinity.Ownership{}, err
	}
	own, err := route.ownership(f, env)
	if err != nil {
		return opts, own, err
	}
	opts.ShardIndex, opts.ShardCount = own.Index, own.Count
	if opts.BucketURL, err = bucket.value(f, env); err != nil {
		return opts, own, err
	}
	if f.isSet("tail-interval") {
		if *tailInterval < minTailInterval {
			return opts, own, usagef("--tail-interval %v is below the minimum %v (a shorter tick spins a core on an idle shard)", *tailInterval, minTailInterval)
		}
		opts.TailInterval = *tailInterval
	}
	return opts, own, nil
}

func addStoreFlags(f *flagSet) *storeFlags {
	s := &storeFlags{}
	f.StringVar(&s.dir, "dir", "", "root `PATH` of the store; a shard lives in PATH/shard-NNNN (default "+bucketlog.DefaultDir+")")
	f.StringVar(&s.root, "root", "", "alias of --dir")
	f.Int64Var(&s.segMax, "segment-max-bytes", 0, "segment size cap in bytes, 1 to 15 MiB (default NOETL_EHDB_EVENTLOG_SEGMENT_MAX_BYTES, else 8 MiB)")
	f.DurationVar(&s.sealAge, "seal-max-age", 0, "seal a non-empty active segment older than this; 0 or negative: never by age (default NOETL_EHDB_SEAL_MAX_AGE_SECS, else 15m)")
	return s
}

// directory is --dir (or --root), or the default.
func (s *storeFlags) directory(f *flagSet) (string, error) {
	return dirFlag(f, s.dir, s.root, bucketlog.DefaultDir)
}

// dirFlag reconciles --dir and its alias --root.
func dirFlag(f *flagSet, dir, root, def string) (string, error) {
	switch {
	case f.isSet("dir") && f.isSet("root") && dir != root:
		return "", usagef("--dir %q and --root %q disagree (they are one flag)", dir, root)
	case f.isSet("dir"):
		dir = strings.TrimSpace(dir)
	case f.isSet("root"):
		dir = strings.TrimSpace(root)
	default:
		dir = def
	}
	if dir == "" {
		return "", usagef("--dir is empty")
	}
	return dir, nil
}

// apply puts the store flags into o (over the environment's values).
func (s *storeFlags) apply(f *flagSet, o *bucketlog.Options) error {
	dir, err := s.directory(f)
	if err != nil {
		return err
	}
	o.Dir = dir
	if f.isSet("segment-max-bytes") {
		if s.segMax < 1 || s.segMax > localseg.MaxSegmentBytes {
			return usagef("--segment-max-bytes %d is outside 1..%d (15 MiB keeps every object below the 16 MiB multipart threshold)", s.segMax, localseg.MaxSegmentBytes)
		}
		o.SegmentMaxBytes = s.segMax
	}
	if f.isSet("seal-max-age") {
		if s.sealAge > 0 && s.sealAge < minSealMaxAge {
			return usagef("--seal-max-age %v is below the minimum %v (0 or negative: never by age)", s.sealAge, minSealMaxAge)
		}
		o.SealMaxAge = s.sealAge
		if s.sealAge <= 0 {
			o.SealMaxAge = -1 // never by age
		}
	}
	return nil
}

// segMax is the segment cap o will use.
func segMax(o bucketlog.Options) int64 {
	if o.SegmentMaxBytes > 0 {
		return o.SegmentMaxBytes
	}
	return bucketlog.DefaultSegmentMaxBytes
}

// routeFlags are --shard-index and --shard-count (append, serve, the
// affinity drives).
type routeFlags struct{ index, count string }

func addRouteFlags(f *flagSet) *routeFlags {
	r := &routeFlags{}
	f.StringVar(&r.index, "shard-index", "", "the shard this process owns, with --shard-count (default NOETL_SHARD_INDEX; both unset: 0 of 1)")
	f.StringVar(&r.count, "shard-count", "", "the number of shards, with --shard-index (default NOETL_SHARD_COUNT)")
	return r
}

// ownership is the pair the flags give, or else the environment's. A
// partial or invalid pair is a usage error, never a silent shard 0.
func (r *routeFlags) ownership(f *flagSet, env envConfig) (affinity.Ownership, error) {
	if f.isSet("shard-index") || f.isSet("shard-count") {
		if !f.isSet("shard-index") || !f.isSet("shard-count") {
			return affinity.Ownership{}, usagef("--shard-index and --shard-count go together (give both or neither)")
		}
		own, err := affinity.ParseOwnership(r.index, r.count)
		if err != nil {
			return affinity.Ownership{}, usagef("%v", err)
		}
		return own, nil
	}
	if env.shardErr != nil {
		return affinity.Ownership{}, env.shardErr
	}
	return affinity.Ownership{Index: env.ShardIndex, Count: max(env.ShardCount, 1)}, nil
}

// shardFlag is --shard of the one-shard commands.
type shardFlag struct{ raw string }

func addShardFlag(f *flagSet) *shardFlag {
	s := &shardFlag{}
	f.StringVar(&s.raw, "shard", "", "the shard `N` (default NOETL_SHARD_INDEX when the NOETL_SHARD_INDEX/NOETL_SHARD_COUNT pair is set, else 0)")
	return s
}

// shard is --shard, or the environment's shard index, or 0.
func (s *shardFlag) shard(f *flagSet, env envConfig) (int, error) {
	if !f.isSet("shard") {
		if env.shardErr != nil {
			return 0, env.shardErr
		}
		return env.ShardIndex, nil
	}
	raw := strings.TrimSpace(s.raw)
	n, err := strconv.Atoi(raw)
	if err != nil || strings.HasPrefix(raw, "+") || n < 0 || n >= affinity.MaxShardCount {
		return 0, usagef("--shard %q is not a shard number 0..%d", s.raw, affinity.MaxShardCount-1)
	}
	// The flag overrides the environment's pair, even an invalid one.
	return n, nil
}

// pageFlags are --after and --limit.
type pageFlags struct {
	after uint64
	limit int
}

func addPageFlags(f *flagSet) *pageFlags {
	p := &pageFlags{}
	f.Uint64Var(&p.after, "after", 0, "return records after this sequence")
	f.IntVar(&p.limit, "limit", defaultLimit, fmt.Sprintf("at most this many records, 0 to %d (0: the counts only)", maxLimit))
	return p
}

func (p *pageFlags) check() error {
	if p.limit < 0 || p.limit > maxLimit {
		return usagef("--limit %d is outside 0..%d", p.limit, maxLimit)
	}
	return nil
}

// bucketFlag is --bucket; the environment's BUCKETLOG_BUCKET_URL is its
// default.
type bucketFlag struct{ url string }

func addBucketFlag(f *flagSet, what string) *bucketFlag {
	b := &bucketFlag{}
	f.StringVar(&b.url, "bucket", "", what+" (s3://, gs://, mem://, file:// for development; default BUCKETLOG_BUCKET_URL)")
	return b
}

// value is the bucket URL the flag or the environment gives ("" for none).
func (b *bucketFlag) value(f *flagSet, env envConfig) (string, error) {
	if f.isSet("bucket") {
		u := strings.TrimSpace(b.url)
		if u == "" {
			return "", usagef("--bucket is empty")
		}
		return u, nil
	}
	return env.BucketURL, nil
}

// required is value, refusing none.
func (b *bucketFlag) required(f *flagSet, env envConfig) (string, error) {
	u, err := b.value(f, env)
	if err == nil && u == "" {
		err = usagef("a bucket is required: --bucket URL or BUCKETLOG_BUCKET_URL")
	}
	return u, err
}

// requireFlags refuses a command line that lacks any of names.
func requireFlags(f *flagSet, names ...string) error {
	var missing []string
	for _, n := range names {
		if !f.isSet(n) {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return usagef("missing required flag %s (bucketlog %s --help)", strings.Join(missing, ", "), f.name)
	}
	return nil
}
