package main

import (
	"time"

	"github.com/bucketlog/bucketlog"
)

// addUnshippedFlags adds serve's unshipped bound (serveAbout).
func addUnshippedFlags(f *flagSet) (maxAge *time.Duration, refuse *bool) {
	maxAge = f.Duration("max-unshipped-age", 0, "not ready (/readyz 503) once the bucket has failed longer than this and the oldest unshipped event is older (default off)")
	refuse = f.Bool("refuse-when-unshipped", false, "past --max-unshipped-age also refuse appends (503, storage) instead of widening the loss window")
	return maxAge, refuse
}

// unshippedOptions checks the unshipped bound's flags into opts.
func unshippedOptions(f *flagSet, opts *bucketlog.Options, maxAge time.Duration, refuse bool) error {
	if f.isSet("max-unshipped-age") {
		if maxAge <= 0 {
			return usagef("--max-unshipped-age %v must be positive", maxAge)
		}
		if opts.BucketURL == "" && opts.Bucket == nil {
			return usagef("--max-unshipped-age needs a bucket (--bucket or BUCKETLOG_BUCKET_URL)")
		}
		opts.MaxUnshippedAge = maxAge
	}
	if refuse {
		if opts.MaxUnshippedAge <= 0 {
			return usagef("--refuse-when-unshipped needs --max-unshipped-age")
		}
		opts.RefuseWhenUnshipped = true
	}
	return nil
}

// minBucketWarnInterval is the shortest --bucket-warn-interval: a shorter
// one would turn the summary back into a line per failed request.
const minBucketWarnInterval = time.Second

// addBucketWarnFlag adds serve's WARN summary interval (serveAbout).
func addBucketWarnFlag(f *flagSet) *time.Duration {
	return f.Duration("bucket-warn-interval", 0, "while the bucket keeps failing, one WARN line with the count per this interval (default NOETL_EHDB_BUCKET_WARN_INTERVAL_SECS, else 1m; at least 1s)")
}

// bucketWarnOptions checks --bucket-warn-interval into opts (it overrides
// the environment's).
func bucketWarnOptions(f *flagSet, opts *bucketlog.Options, d time.Duration) error {
	if !f.isSet("bucket-warn-interval") {
		return nil
	}
	if d < minBucketWarnInterval {
		return usagef("--bucket-warn-interval %v is below the minimum %v", d, minBucketWarnInterval)
	}
	if opts.BucketURL == "" && opts.Bucket == nil {
		return usagef("--bucket-warn-interval needs a bucket (--bucket or BUCKETLOG_BUCKET_URL)")
	}
	opts.BucketWarnInterval = d
	return nil
}
