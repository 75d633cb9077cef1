package main

import (
	"strconv"
	"strings"

	"github.com/bucketlog/bucketlog"
)

// Local retention (issue 16): serve's --local-retention-bytes (env
// BUCKETLOG_LOCAL_RETENTION_BYTES) bounds the sealed segments kept on the
// local disk; beyond it the oldest ones durable in the bucket are evicted
// and read from the bucket. --remote-cache-bytes (env
// BUCKETLOG_REMOTE_CACHE_BYTES) bounds the fetched segments kept in memory.
// Unset keeps everything, as before. A bad environment value is ignored
// with a warning (fail-safe: it never starts evicting); a bad flag is a
// usage error.
const (
	EnvLocalRetentionBytes = "BUCKETLOG_LOCAL_RETENTION_BYTES"
	EnvRemoteCacheBytes    = "BUCKETLOG_REMOTE_CACHE_BYTES"
)

type localRetentionFlags struct{ budget, cache int64 }

func addLocalRetentionFlags(f *flagSet) *localRetentionFlags {
	l := &localRetentionFlags{}
	f.Int64Var(&l.budget, "local-retention-bytes", 0, "bound on the sealed segments kept on the local disk (needs a bucket; default BUCKETLOG_LOCAL_RETENTION_BYTES, else unset: keep everything); beyond it the oldest segments durable in the bucket leave the disk and are read from the bucket")
	f.Int64Var(&l.cache, "remote-cache-bytes", 0, "memory for evicted segments fetched from the bucket (default BUCKETLOG_REMOTE_CACHE_BYTES, else 64 MiB)")
	return l
}

// apply puts the environment's values, then the flags', into o.
func (l *localRetentionFlags) apply(c *cli, f *flagSet, o *bucketlog.Options) error {
	for _, v := range []struct {
		env, flag string
		val       int64
		dst       *int64
	}{
		{EnvLocalRetentionBytes, "local-retention-bytes", l.budget, &o.LocalRetentionBytes},
		{EnvRemoteCacheBytes, "remote-cache-bytes", l.cache, &o.RemoteCacheBytes},
	} {
		if raw := strings.TrimSpace(c.getenv(v.env)); raw != "" {
			if n, err := strconv.ParseInt(raw, 10, 64); err != nil || n <= 0 {
				c.log.Warn("environment value ignored", "warning", v.env+"="+strconv.Quote(raw)+" is not a positive integer; unset")
			} else {
				*v.dst = n
			}
		}
		if f.isSet(v.flag) {
			if v.val <= 0 {
				return usagef("--%s %d must be positive", v.flag, v.val)
			}
			*v.dst = v.val
		}
	}
	if o.LocalRetentionBytes > 0 && o.BucketURL == "" {
		return usagef("--local-retention-bytes needs a bucket (--bucket or BUCKETLOG_BUCKET_URL): only segments durable in the bucket leave the disk")
	}
	return nil
}
