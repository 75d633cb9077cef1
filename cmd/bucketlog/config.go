package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/internal/localref"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/reclaim"
)

// Environment variables of the README's Configuration table.
const (
	EnvBackend            = "NOETL_EHDB_EVENTLOG_BACKEND"
	EnvGC                 = "NOETL_EHDB_EVENTLOG_GC"
	EnvGCMinRetained      = "NOETL_EHDB_EVENTLOG_GC_MIN_RETAINED_SEGMENTS"
	EnvGCMaxRetained      = "NOETL_EHDB_EVENTLOG_GC_MAX_RETAINED_SEGMENTS"
	EnvGCInterval         = "NOETL_EHDB_EVENTLOG_GC_INTERVAL_SECS"
	EnvSegmentMaxBytes    = "NOETL_EHDB_EVENTLOG_SEGMENT_MAX_BYTES"
	EnvSealMaxAge         = "NOETL_EHDB_SEAL_MAX_AGE_SECS"
	EnvTailReplication    = "NOETL_EHDB_TAIL_REPLICATION"
	EnvTailInterval       = "NOETL_EHDB_TAIL_INTERVAL_SECS"
	EnvTailCleanup        = "NOETL_EHDB_TAIL_CLEANUP"
	EnvShardIndex         = "NOETL_SHARD_INDEX"
	EnvShardCount         = "NOETL_SHARD_COUNT"
	EnvBucketURL          = "BUCKETLOG_BUCKET_URL"
	EnvBucketWarnInterval = "NOETL_EHDB_BUCKET_WARN_INTERVAL_SECS"
	BackendDurableSegment = "durable_segment"
	BackendLocalReference = "local_reference"
)

// EnvVars lists every variable Config reads, in documentation order.
var EnvVars = []string{
	EnvBackend, EnvGC, EnvGCMinRetained, EnvGCMaxRetained, EnvGCInterval, EnvSegmentMaxBytes,
	EnvSealMaxAge, EnvTailReplication, EnvTailInterval, EnvTailCleanup, EnvShardIndex,
	EnvShardCount, EnvBucketURL, EnvBucketWarnInterval,
}

// Config is the resolved configuration of every axis, as the environment
// (and then flags) set it. It is secret-free once redacted.
type Config struct {
	Backend         string              `json:"storage_backend"`
	BucketURL       string              `json:"bucket_url"`
	ShardIndex      int                 `json:"shard_index"`
	ShardCount      int                 `json:"shard_count"`
	SegmentMaxBytes int64               `json:"segment_max_bytes"`
	SealMaxAge      time.Duration       `json:"seal_max_age"`
	TailReplication bool                `json:"tail_replication"`
	TailInterval    time.Duration       `json:"tail_interval"`
	TailCleanup     bool                `json:"tail_cleanup"`
	GC              bucketlog.GCOptions `json:"gc"`
	// Warnings lists every value that was ignored and why.
	Warnings []string `json:"warnings"`

	// BucketWarnInterval is serve's WARN summary interval (0: the default).
	BucketWarnInterval time.Duration `json:"bucket_warn_interval"`
}

// ConfigFromEnv reads the README's Configuration table's variables through getenv (os.Getenv in
// production). Parsing is fail-safe: an unset, empty or unknown value keeps
// the default and adds a warning; it never changes the authoritative store
// or starts deleting data. The one hard error is a partial or invalid shard
// pair, which must stop start-up rather than fall back to shard 0.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Backend:         BackendDurableSegment,
		SegmentMaxBytes: bucketlog.DefaultSegmentMaxBytes,
		SealMaxAge:      bucketlog.DefaultSealMaxAge,
		TailReplication: true,
		TailInterval:    bucketlog.DefaultTailInterval,
		TailCleanup:     true,
		GC:              bucketlog.GCOptions{MinRetainedSegments: bucketlog.DefaultMinRetainedSegments},
	}
	warn := func(format string, args ...any) { c.Warnings = append(c.Warnings, fmt.Sprintf(format, args...)) }
	get := func(name string) (string, bool) {
		v := strings.TrimSpace(getenv(name))
		return v, v != ""
	}

	// The backend selector and the GC policy have their own fail-safe
	// parsers next to the code they select. The non-durable driver is
	// selected only by the exact token (the README's Configuration table): a value that is the
	// token with blanks around it keeps the durable store, with a warning.
	raw := getenv(EnvBackend)
	switch b, w := localref.ParseBackend(raw); {
	case b == localref.LocalReference && raw == BackendLocalReference:
		c.Backend = BackendLocalReference
	case b == localref.LocalReference:
		warn("%s=%q is not exactly %q; keeping %s", EnvBackend, raw, BackendLocalReference, BackendDurableSegment)
	case w != "" && strings.TrimSpace(raw) != "":
		c.Warnings = append(c.Warnings, w)
	}
	pol, warns := reclaim.ParsePolicy(getenv)
	c.Warnings = append(c.Warnings, warns...)
	c.GC.Enabled = pol.Enabled
	c.GC.MinRetainedSegments = pol.MinRetainedSegments
	c.GC.MaxRetainedSegments = pol.MaxRetainedSegments
	if n, ok := envInt(get, warn, EnvGCInterval, 0, math.MaxInt32); ok {
		c.GC.Interval = time.Duration(n) * time.Second
	}
	if v, ok := get(EnvSegmentMaxBytes); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil || n <= 0:
			warn("%s=%q is not a positive integer; keeping %d", EnvSegmentMaxBytes, v, c.SegmentMaxBytes)
		case n > localseg.MaxSegmentBytes:
			warn("%s=%d is above %d (15 MiB); clamped", EnvSegmentMaxBytes, n, localseg.MaxSegmentBytes)
			c.SegmentMaxBytes = localseg.MaxSegmentBytes
		default:
			c.SegmentMaxBytes = n
		}
	}
	if n, ok := envInt(get, warn, EnvSealMaxAge, 1, math.MaxInt32); ok {
		c.SealMaxAge = time.Duration(n) * time.Second
	}
	if v, ok := get(EnvTailReplication); ok {
		switch b, known := parseSwitch(v); {
		case !known:
			warn("%s=%q is not on/off; tail replication stays on", EnvTailReplication, v)
		default:
			c.TailReplication = b
		}
	}
	if n, ok := envInt(get, warn, EnvTailInterval, 1, math.MaxInt32); ok {
		c.TailInterval = time.Duration(n) * time.Second
	}
	if v, ok := get(EnvTailCleanup); ok {
		switch b, known := parseSwitch(v); {
		case !known:
			warn("%s=%q is not on/off; tail cleanup stays on", EnvTailCleanup, v)
		default:
			c.TailCleanup = b
		}
	}
	if n, ok := envInt(get, warn, EnvBucketWarnInterval, 1, math.MaxInt32); ok {
		c.BucketWarnInterval = time.Duration(n) * time.Second
	}
	c.BucketURL, _ = get(EnvBucketURL)

	idx, _ := get(EnvShardIndex)
	cnt, _ := get(EnvShardCount)
	own, err := affinity.ParseOwnership(idx, cnt)
	if err != nil {
		return c, fmt.Errorf("%w: %s/%s: %v", bucketlog.ErrUsage, EnvShardIndex, EnvShardCount, err)
	}
	c.ShardIndex, c.ShardCount = own.Index, own.Count
	return c, nil
}

// Apply copies the configuration onto opts (flags then override opts).
func (c Config) Apply(opts *bucketlog.Options) {
	opts.BucketURL = c.BucketURL
	opts.ShardIndex, opts.ShardCount = c.ShardIndex, c.ShardCount
	opts.SegmentMaxBytes = c.SegmentMaxBytes
	opts.SealMaxAge = c.SealMaxAge
	opts.DisableTailReplication = !c.TailReplication
	opts.TailInterval = c.TailInterval
	opts.DisableTailCleanup = !c.TailCleanup
	opts.GC = c.GC
	opts.BucketWarnInterval = c.BucketWarnInterval
}

// envInt parses an integer variable in [lo, hi]; anything else keeps the
// default with a warning.
func envInt(get func(string) (string, bool), warn func(string, ...any), name string, lo, hi int64) (int64, bool) {
	v, ok := get(name)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		warn("%s=%q is not an integer in [%d, %d]; keeping the default", name, v, lo, hi)
		return 0, false
	}
	return n, true
}

func parseSwitch(v string) (on, known bool) {
	switch strings.ToLower(v) {
	case "on", "true", "1", "yes", "enabled":
		return true, true
	case "off", "false", "0", "no", "disabled":
		return false, true
	}
	return false, false
}
