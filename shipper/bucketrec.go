// A shard directory's record of the bucket it ships to (bucket.json):
// written the first time the shard opens with a bucket, read and compared
// on every later open, so a store is never shipped to (nor reclaimed
// against) another bucket by a typo.

package shipper

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// InjectedBucketURL is what the record holds for a bucket handed to Open as
// Options.Bucket without a BucketURL (tests, fault injection): its
// identity is unknown, so it compares equal to any bucket (see SameBucket).
const InjectedBucketURL = "injected://bucket"

// BucketRecord is bucket.json: the store ships to this bucket (URL redacted).
type BucketRecord struct {
	URL string `json:"url"`
}

// CheckBucketRecord refuses to open a shard directory that records another
// bucket than the one it is opened with (bucket.json, docs/FORMAT.md §3.8): a typo in a
// bucket URL or prefix would otherwise ship the store there, and GC would
// reclaim against that bucket's watermark. It runs before Open changes any
// byte. A directory without a record, or an Open without a bucket, is not
// its concern (the caller refuses a shipping store opened without its
// bucket).
//
// Re-pointing a store at another bucket on purpose is done by removing
// bucket.json while no process has the shard open: the next Open with the
// new bucket then records it, and its reconcile checks the local store
// against the new bucket as on any first open with a bucket (a bucket that
// holds another history of the shard is still refused as stale or
// diverged). An option or flag is deliberately not offered: it would sit in
// service configuration and re-point silently on every restart, while a
// removed file is a one-time act on the one directory it concerns.
func CheckBucketRecord(dir string, rec BucketRecord, now string) error {
	if SameBucket(rec.URL, now) {
		return nil
	}
	return fmt.Errorf("%w: "+"shard directory %s ships to %s, not to %s: refusing to open it with another bucket "+
		"(nothing was changed). To move the store to that bucket on purpose, stop every process on the shard, "+
		"remove %s and open it with the new bucket",
		affinity.ErrUsage, dir, rec.URL, blobtier.Redact(now), localseg.BucketRecordPath(dir))
}

// SameBucket reports whether two bucket URLs (either may be redacted) name
// the same bucket: the same scheme, bucket, path and prefix=. Parameter
// order, credentials and every other parameter (endpoint, region,
// use_path_style, checksum settings...) are ignored: they change how the
// bucket is reached, not which bucket it is (one bucket is reached through
// a VPC endpoint, a proxy or an emulator on a new port; a server that holds
// another history under the same name is refused by Open's reconcile as a
// stale or diverged disk). An injected bucket compares
// equal to anything.
func SameBucket(recorded, now string) bool {
	if recorded == InjectedBucketURL || now == InjectedBucketURL {
		return true
	}
	a, aok := canonicalBucketURL(recorded)
	b, bok := canonicalBucketURL(now)
	if !aok || !bok {
		return recorded == now
	}
	return a == b
}

// canonicalBucketURL is the identity of a bucket URL: scheme, host, path
// and prefix, in a fixed spelling.
func canonicalBucketURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host, p := u.Host, u.Path
	switch scheme {
	case "s3", "gs":
		host, p = strings.ToLower(host), strings.TrimSuffix(p, "/")
	case "file":
		if p != "" {
			p = path.Clean(p)
		}
	}
	q := u.Query()
	v := url.Values{}
	v.Set("prefix", q.Get("prefix"))
	return scheme + "://" + host + p + "?" + v.Encode(), true
}

// ReadBucketRecord reads dir's record; ok is false when there is none. A damaged
// record still says the store ships (localseg.ReadBucketRecord).
func ReadBucketRecord(dir string) (BucketRecord, bool, error) {
	u, ok, err := localseg.ReadBucketRecord(dir)
	return BucketRecord{URL: u}, ok, err
}

// WriteBucketRecord writes r as dir's record, durably (localseg.WriteBucketRecord).
func WriteBucketRecord(fsys localseg.FS, dir string, r BucketRecord) error {
	return localseg.WriteBucketRecord(fsys, dir, r.URL)
}

// CheckOpen reads dir's record and refuses, before anything changes, an
// open it forbids: with a bucket (url, "" for an injected one), a record
// of another bucket (CheckBucketRecord); without one, an open that would
// write to a store that ships (background set: a writable open that runs
// the background work), which must be opened with its bucket. recorded
// says whether dir holds a record.
func CheckOpen(dir string, withBucket bool, url string, background bool) (recorded bool, err error) {
	rec, recorded, err := ReadBucketRecord(dir)
	switch {
	case err != nil:
		return false, err
	case recorded && withBucket:
		return true, CheckBucketRecord(dir, rec, recordURL(url))
	case recorded && background:
		return true, usagef("shard directory %s ships to %s: open it with that bucket", dir, rec.URL)
	}
	return recorded, nil
}

// RecordBucket writes dir's record of the bucket it now ships to: url
// redacted, or InjectedBucketURL for an injected bucket (url ""). A nil
// fsys is the operating system's.
func RecordBucket(fsys localseg.FS, dir, url string) error {
	if fsys == nil {
		fsys = localseg.OSFS{}
	}
	return WriteBucketRecord(fsys, dir, BucketRecord{URL: blobtier.Redact(recordURL(url))})
}

func recordURL(url string) string {
	if url != "" {
		return url
	}
	return InjectedBucketURL
}

// ShipsTo reports whether the shard directory records a bucket, and which.
func ShipsTo(dir string) (string, bool) {
	r, ok, _ := ReadBucketRecord(dir)
	return r.URL, ok
}

// OpenBucket is the one way a bucket is taken, given as a value or as a
// URL: an injected bucket (the caller keeps it) wins over a URL, which is
// opened here and closed by the returned func.
func OpenBucket(ctx context.Context, url string, b blobtier.Bucket) (blobtier.Bucket, func(), error) {
	if b != nil {
		return b, func() {}, nil
	}
	if url == "" {
		return nil, nil, usagef("a bucket URL is required")
	}
	bk, err := blobtier.Open(ctx, url, blobtier.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return bk, func() { bk.Close() }, nil
}
