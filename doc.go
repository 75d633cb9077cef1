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
// Open with a bucket checks first and acts after, and a shard directory
// records the bucket it ships to (bucket.json): what Open checks, refuses
// and repairs in the bucket is package shipper's contract (its doc.go).
//
// Crash assumptions: the disk honours fdatasync and a directory fsync (a
// write that returned before a crash may be lost unless a completed fsync
// covered it; a sector write is not atomic); the bucket is strongly
// consistent for read-after-write and listing (S3 and GCS are), honours
// create-if-absent and, for shared GC, compare-and-swap.
//
// A shard that detected a second writer (a different object under one of
// its write-once keys) stops shipping and refuses every write — appends,
// acks, consumer deletes and a pull that would create a consumer — with
// ErrSecondWriter (class storage, HTTP 503) until it is reopened; reads,
// and pulls of existing consumers, are still served (what counts as a second
// writer: package shipper's doc.go).
//
// Close ships one last time (bounded by ShutdownShipTimeout), then releases
// every synchronous append still waiting: each returns at once with
// ErrNotInBucket unless that shipment put its event in the bucket.
//
// Public types: the root owns every type a user needs (types.go), so a
// program imports only this package. Errors: one taxonomy (errors.go).
//
// Contexts: every method that can reach the disk or the bucket takes a
// context. A cancelled context refuses the operation before it starts; a
// read of another shard's execution (a cold load from the bucket) is bounded
// by it throughout. A local append, scan or pull, once started, runs to its
// fsync: it is not abandoned half-way.
//
// Routing happens once, in Log: an event of another shard's execution is
// refused (ErrNotOwner, naming the owner) before any store is touched, and
// reads of another shard are cold loads; the store below never routes.
//
// Concurrency: *Log is safe for concurrent use. Background work (uploads,
// tail shipping, GC) never holds the lock appends take while it talks to
// the bucket.
package bucketlog
