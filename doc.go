// Package bucketlog is a durable event log whose home is an object-store
// bucket.
//
// One Open is one owned shard. An append is framed, written to the shard's
// active segment file and fdatasync'd before it returns (concurrent appends
// share one fdatasync). Sealed segments are uploaded to the bucket as
// write-once objects; the unsealed tail ships as write-once tail objects on
// every tick (the tick is the loss window: an event appended just after a
// tick exists only on the local disk until the next one), or before the
// append returns in synchronous mode. Segments that every consumer has acked
// (or that keep-last-N retention releases) are reclaimed behind a monotonic
// watermark object, and a fresh machine rebuilds any shard from the bucket
// alone.
//
// A shard directory records the bucket it ships to (bucket.json) the first
// time it is opened with one; Open refuses another bucket, prefix or endpoint
// (ErrUsage) before changing a byte. Re-pointing a store on purpose is done
// by removing bucket.json while the shard is stopped (not by an option, which
// would re-point on every restart). An injected Options.Bucket without a
// BucketURL has no known identity and matches any record.
//
// Crash assumptions: the disk honours fdatasync and a directory fsync (a
// write that returned before a crash may be lost unless a completed fsync
// covered it; a sector write is not atomic); the bucket is strongly
// consistent for read-after-write and listing (S3 and GCS are), honours
// create-if-absent and, for shared GC, compare-and-swap.
//
// Concurrency: *Log is safe for concurrent use. Background work (uploads,
// tail shipping, GC) never holds the lock appends take while it talks to
// the bucket.
package bucketlog
