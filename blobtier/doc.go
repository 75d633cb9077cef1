// Package blobtier is bucketlog's boundary to an object-store bucket: S3,
// GCS, or anything else gocloud.dev/blob opens. It is a leaf: it knows keys,
// metadata and conditional writes, and nothing of frames, segments or
// shards' contents (coldload re-checks every frame's CRC).
//
// # Keys
//
// Keys are fixed width, lowercase hex, relative to the bucket (a prefix= in
// the URL is applied by gocloud), built and parsed only here (docs/FORMAT.md §6.1):
//
//	noetl.ehdb.seg.<shard:08x>.<segment_id:016x>                   sealed segment (40 chars)
//	noetl.ehdb.tail.<shard:08x>.<first_seq:016x>.<last_seq:016x>   tail batch
//	noetl.ehdb.rw.<shard:08x>                                      reclaim watermark
//	noetl.ehdb.cur.<shard:08x>                                     consumer cursors
//
// ParseKey is strict, and every write refuses a key it rejects (ErrBadKey),
// so nothing the log writes can later be mistaken for something else. A
// listing by kind and shard is a flat prefix listing; keys under the prefix
// that do not parse are still yielded, flagged with ParseErr, so cleanup can
// count them and keep them.
//
// # Metadata and verified reads
//
// Every object carries user metadata `length` (decimal), `xxh64` (16
// lowercase hex digits, XXH64 seed 0 of the whole object) and `epoch` (16
// lowercase hex digits, the writer's ownership epoch; 0 until writer fencing
// exists; absent reads as 0). Get reads the metadata and the bytes (at
// most one byte more than `length`) and checks both: a short, long or
// altered object, or missing or malformed metadata, is ErrCorrupt naming the
// key, never a silently shortened result. Where the GET's response carries
// the metadata and the version token (S3, GCS XML reads, memcas) a Get is
// that one request; elsewhere it is a stat, then a read. The digest is
// computed as the bytes arrive (256 KiB at a time, still in the cache).
// GetBuffered (BufferedGetter, also on Observe's wrapper) is Get into a
// buffer the caller reuses, with the same checks; the result holds only
// what that read returned. GetWatched (WatchedGetter) is GetBuffered that
// shows a Watcher the bytes read so far after each chunk is hashed (a
// Reset before every attempt at the object), so a caller's own checks of
// the content (a frame.Verifier's) overlap the download: for an object of
// more than one 256 KiB chunk the hash and the Watcher run on a goroutine
// of the read's own, beside the reads, and are done when it returns; the bytes shown
// are not yet checked, and what the Watcher concluded counts only when the
// read returned no error. S3 does not check content on read
// and GCS checks only its own CRC32C, so this digest is what catches damage
// at rest. An object is durable in the bucket when a verified Get (or a Stat
// whose length and xxh64 equal the local bytes) says so; the mere presence
// of a key proves nothing.
//
// # Write-once objects
//
// PutIfAbsent is a create-if-absent write (S3 If-None-Match: *, GCS
// ifGenerationMatch=0). When the key is taken (412, or the 409 S3 answers
// to overlapping conditional writes) the existing object's metadata is read:
// the same length, digest and epoch is success, so a put retried after a
// lost answer is idempotent; anything else is ErrConflict, which on a
// segment or tail key means a second writer on the shard. blobtier never
// overwrites a write-once key. Objects over MaxObjectBytes (15 MiB) are
// refused before any request, so no conditional write ever becomes a
// multipart upload (gofakes3 ignores conditions on multipart completion).
//
// # Compare-and-swap
//
// The watermark and cursor objects are rewritten with CompareAndSwap on the
// version token GetVersioned returned: the ETag with If-Match on S3, the
// generation with ifGenerationMatch on GCS; an empty token means "create
// only if absent". A lost race is ErrPrecondition; the caller re-reads and
// retries. An S3 ETag is the MD5 of the content, so two writes of identical
// bytes share a token: the bodies of rewritten objects carry an increasing
// version `v` so that never happens. The token GetVersioned returns comes
// from the same response as the bytes, or from a stat before them, so it is
// never newer than them: a CAS on it can fail spuriously, never overwrite
// an unseen write. The mode is found at New time
// from the client behind the bucket (b.As); memblob and fileblob offer no
// conditional write but create-if-absent, so there CanCAS is false and
// CompareAndSwap returns ErrUnsupported (the cursor object is then written
// with Put by its single owner, and shared GC is refused by the caller).
//
// # Deadlines
//
// Every call runs under Options.Timeout (default 30 s) on top of the
// caller's ctx; a listing gets it per page request. A hung server therefore
// costs at most one timeout per call. This matters most on GCS, whose
// client may retry a refused conditional write until its context ends.
//
// # Errors
//
// gocloud error codes (and the S3 409) are mapped to the package sentinels
// in one place (classify). Every error about one object is an *ObjectError
// naming the operation and the key and wrapping a sentinel where one applies
// plus the driver's error; test them with errors.Is. A missing key is
// ErrNotFound for Get and Stat and success for Delete. Provider types (As)
// never leave this package.
//
// # What the bucket is assumed to do
//
//   - A successful write is durable and strongly consistent: read-after-write
//     and list-after-write see it (true of S3 since 2020 and of GCS). A
//     listing may still omit an object written concurrently with it;
//     callers never delete on the strength of an absent listing entry.
//   - Conditional writes are atomic on S3, GCS, memblob and the emulators.
//     fileblob (file://) is not: it stats then renames, so two racing
//     create-if-absent writers can both succeed, and it never fsyncs. Use
//     file:// for development only; never rely on it for write-once,
//     second-writer detection or crash durability.
//   - A failed or timed-out write may still have landed (a lost answer). That
//     is why PutIfAbsent treats identical bytes as success and why CAS
//     bodies carry a version: the caller re-reads and sees its own write.
//   - Listings return keys in lexicographic order (S3, GCS, memblob and
//     fileblob do), so a kind's objects come in numeric order.
//   - Versioned buckets keep deleted objects as noncurrent versions; use a
//     lifecycle rule.
//
// # Concurrency
//
// A Bucket is safe for concurrent use; it holds no lock of its own while a
// request is in flight. Close ends it: later calls return ErrClosed.
// Observe's decorator is as safe as the Bucket it wraps and the Observer it
// calls.
package blobtier
