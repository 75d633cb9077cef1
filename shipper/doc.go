// Package shipper ships one shard to its bucket (shipper.go). Its contract
// at Open, which the root package's Open relies on (the Log opens the
// store, then New reconciles it with the bucket):
//
// Open with a bucket checks first and acts after: a refused Open (stale or
// diverged disk, another writer's history) leaves the shard directory
// byte-identical (an empty LOCK file aside) and the watermark untouched; only
// then does it adopt the bucket's watermark locally. A damaged watermark is
// rewritten after the checks with the local reclaim base, raised to the last
// local segment boundary below the lowest sequence the bucket still holds,
// so the repair never lowers it. The uploader deletes its own damaged
// segment object to put it again after tail objects hold the segment's
// events (bridge.go), so that delete leaves no hole the repair takes for a
// reclaim (when they cannot be put it deletes all the same: the hole stays
// open only while the put again fails too). A damaged cursor object does not stop the
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
// With fencing, Open's checks follow the lineage of the same read
// (reconcile_lineage.go): a stale writer's tail objects beyond the cut
// that ended its epoch, and its seals at or above the cut's fence, neither
// make the disk look behind or diverged nor count in the rebuilt cursor (its
// epoch is learnt from the read the checks make of the object anyway: the GET
// of a tail object, the HEAD of a segment; listings carry no metadata). Open
// reads each object at most once and lists each kind once; after a
// takeover's cold load it lists nothing, and judges the hydrated store
// against the listing the cold load read after the claim (Options.Listed),
// which Listing hands on to the takeover's cut.
// A stale writer's seal below the fence whose events run past its epoch's
// end holds our local segment when its valid part (cut after the end, as
// every cold load cuts it) is byte-identical to it: durable, not diverged.
//
// A shard directory records the bucket it ships to (bucket.json) the first
// time it is opened with one; Open refuses another bucket or prefix
// (ErrUsage) before changing a byte. Re-pointing a store on purpose is done
// by removing bucket.json while the shard is stopped (not by an option, which
// would re-point on every restart). An injected Options.Bucket without a
// BucketURL has no known identity and matches any record.
//
// A different object under one of the shard's write-once keys is a second
// writer (ErrSecondWriter: shipping, GC and cleanup stop). An object that
// carries our own metadata but not its bytes (our damaged upload, left over
// when its delete failed) is no second writer: it is deleted and uploaded
// again, after tail objects that hold its events (bridge.go). An older epoch's damaged object under a tail key we need is shipped
// around: the active segment is sealed and uploaded, and when that upload
// fails too, the batch ships cut shorter under other tail keys (recut.go).
// A GC pass during which a newer owner fenced this writer (its bucket
// deletes under that owner's watermark refused) answers ErrFenced with
// outcome "fenced", never "reclaimed"; its report still counts what it did.
//
// Eviction (evict.go; Options.LocalRetentionBytes): every maintenance
// pass and every Ship, after the uploads, asks the store to evict the
// oldest sealed segments beyond the budget that isDurable holds durable
// (read back intact), stopping at the first that is not. At start an
// evicted segment counts durable when its object's metadata names the
// bytes it had when it left the disk (no read-back: every remote read
// verifies them); one not listed so stops the start (retried), one that
// differs is ErrDiverged. RemoteSegments is the store's source of evicted
// segments.
//
// Self-healing (heal.go): once the start's verdict is in, the store may
// replace a corrupt local sealed segment by its object when isDurable
// holds it (localseg heal.go). At start, a local segment whose bytes differ
// from its object is no divergence when they are damaged (they no longer
// hash to the digest its index file recorded, which the object carries; or,
// with no index file, they fail verification): it counts durable, the
// start's comparisons read its object instead, and HealPending replaces it
// as the open's last step, so a refused open changes no byte. An upload
// pass meeting a damaged segment whose object the start's listing missed
// judges it the same way.
//
// Index objects (indexobj.go; docs/FORMAT.md §6.10): once a segment is
// durable, the uploader puts its index (the store's SegmentIndexObject)
// under idx.<shard>.<id>, write-once with the writer's epoch. Derived, best
// effort: a failure is counted and retried while the segment is local, and
// never fails or holds back shipping, GC or eviction; another object under
// the key is left in place (readers use an index object only when it
// records their segment's exact length and xxh64). RemoteSegments serves
// them to the store (FetchIndex).
//
// Restore and Verify (restore.go) take the bucket the one way (OpenBucket);
// a restored directory records its bucket like an opened one. A nil
// *Shipper (a store without a bucket) answers the root's gates (Appended,
// Stopped, RefusesPull, ShippedThrough) with nothing to do.
//
// Synchronous appends (tail.go, tailpipe.go) are acknowledged once their
// tail object's put was accepted and read back intact, the fence HEAD sent
// after that put found no newer claim, and the shipped position covers
// them; the cursor object is no part of it (restore appends every tail
// object beyond the cursor), and passes a synchronous append kicks leave it
// to the periodic tick, so it lags the tail by about one tick at most, as
// in asynchronous mode. Up to three such passes run at once, each from the
// shipped position, so commits stay contiguous and no group is acknowledged
// above a failed lower put.
//
// Crash assumptions are the root package's (the disk honours fdatasync and
// a directory fsync; the bucket is strongly consistent and honours
// create-if-absent and compare-and-swap). A *Shipper is safe for concurrent
// use; its loops never hold a lock appends take while they talk to the
// bucket.
package shipper
