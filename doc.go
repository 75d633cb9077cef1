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
// Open with a bucket checks first and acts after: a refused Open (stale or
// diverged disk, another writer's history) leaves the shard directory
// byte-identical (an empty LOCK file aside) and the watermark untouched; only
// then does it adopt the bucket's watermark locally. A damaged watermark is
// rewritten after the checks with the local reclaim base, raised to the last
// local segment boundary below the lowest sequence the bucket still holds,
// so the repair never lowers it. A damaged cursor object does not stop the
// owner: it is rebuilt after the checks from the owner's shipped position
// and consumers (logged), never below what the bucket's objects imply
// (our damaged segments, which the uploader puts again, count), so its
// shipped_through does not move backward; the first pass after a start
// rewrites the cursor object when the consumers differ from the ones it
// holds (a consumer deleted before the next event leaves it). A bucket segment counts durable at start only when
// it reads back intact, unless the running uploader already read it back (the
// cursor object's shipped_through passed it and no tail object is left over
// it), so Open does not download the retained history on every start.
//
// A shard directory records the bucket it ships to (bucket.json) the first
// time it is opened with one; Open refuses another bucket or prefix
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
// A shard that detected a second writer (a different object under one of
// its write-once keys) stops shipping and refuses every write — appends,
// acks, consumer deletes and a pull that would create a consumer — with
// ErrSecondWriter (class storage, HTTP 503) until it is reopened; reads,
// and pulls of existing consumers, are still served. An object that carries
// our own metadata but not its bytes (our damaged upload, left over when its
// delete failed) is no second writer: it is deleted and uploaded again.
//
// Close ships one last time (bounded by ShutdownShipTimeout), then releases
// every synchronous append still waiting: each returns at once with
// ErrNotInBucket unless that shipment put its event in the bucket.
//
// Public types: the root owns every type a user needs (Event, Record, Page,
// AppendResult, PullResult, ReadResult, BatchResult, the reports, Bucket,
// FS, Ownership) — ReadResult and BatchResult defined here, the others as
// type aliases of the package that defines them (types.go), so a program
// imports only this package and its values pass to the lower packages
// without conversion.
//
// Errors: one taxonomy (errors.go). Class(err) is c exactly when
// errors.Is(err, the sentinel of c) holds, for errors of every package;
// storage is the class of whatever matches no sentinel.
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
