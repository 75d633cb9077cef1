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
