// Package coldload rebuilds a shard's local store from the bucket alone
// (docs/FORMAT.md §9): Hydrate for a new owner or a restore, ReadOnly for a
// non-owner read (Opener: one per read, the bucket's or else the local
// view), Verify for `bucketlog verify`.
//
// # Hydrate, step by step
//
//  1. Refuse a target directory that holds anything (ErrNotEmpty) or that is
//     named shard-NNNN for another shard (ErrWrongShard). A restore never
//     writes over a store. The one exception is a store that never started:
//     a directory holding only the writer's LOCK (a crash or a full disk
//     between the lock and the first segment). Its lock is taken first —
//     held by a live writer, the restore is refused with localseg.ErrLocked
//     — and then removed, so the directory counts as empty.
//  2. Read the reclaim watermark, then the cursor object, then list the
//     shard's segment and tail objects. The watermark comes first so that
//     whatever it reclaims is skipped; the cursor object comes before the
//     listings so that everything its shipped_through claims was already in
//     the bucket when the listing began (the owner writes the cursor only
//     after the tail put it describes succeeded). No object at all is
//     ErrEmpty unless AllowEmpty: a wrong prefix must not look like an
//     empty log. A damaged cursor object (it fails verification or does
//     not decode) does not stop the restore: it goes on without it, takes
//     the consumers from the frames alone, skips the shipped_through check
//     and reports Report.CursorDamaged (and a warning); Verify lists it as
//     a corrupt object and checks the rest of the shard. A cursor object
//     that cannot be read at all (the bucket fails) is still an error.
//     The watermark must be vouched for by another object before anything
//     is written (plan.checkWatermark): the cursor object's shipped_through
//     at or above it, a tail key reaching it, a segment object above its
//     segment (whose content must then continue it), or its own segment,
//     not yet deleted, ending exactly at it. Any one witness suffices: the
//     cursor object lags the watermark by up to a tick, and a reclaim
//     deletes the segments below it; after a GC that reclaimed everything
//     the cursor object is the witness. A watermark nothing vouches for is
//     forged or misplaced (it would restore as an empty log far above the
//     real history): *WatermarkAheadError (ErrWatermarkAhead, also
//     localseg.ErrInvalidState) unless AllowWatermarkAhead, which takes it
//     as it is and reports it. A bucket with a watermark and no cursor
//     object (written by every owner since tail shipping began, tail
//     replication on or off) therefore needs a segment or tail object to
//     vouch for it; one holding the watermark alone is refused. So is, in
//     a narrow window, a real one: an owner that crashed after a GC
//     reclaimed and deleted everything up to its tip but before its next
//     cursor write. A restore retries while the bucket changes; for a dead
//     owner's bucket an operator who knows the history was reclaimed uses
//     AllowWatermarkAhead.
//     After the listings the start records of writer fencing are read and
//     their chain built (a damaged record or a broken chain is ErrLineage,
//     before anything is written); every object read from here on is
//     judged by the lineage rule (lineage.go: frames of epochs off the
//     chain or beyond their epoch's cut are dropped, such objects skipped
//     and counted in Report.ZombieObjects).
//  3. Write the watermark as reclaim.json first, so the store's base offset
//     holds and its segment ids start above every reclaimed one.
//  4. Read the segments above the watermark segment in parallel
//     (Options.Concurrency, default 8; errgroup.SetLimit), verify each and
//     write it as its own file (localseg.WriteSegmentFile: write, fsync) as
//     soon as it is verified. Memory is bounded by the concurrency window,
//     not by the log: each worker reads into a buffer of the largest listed
//     object's size that it reuses for object after object
//     (blobtier.GetWatched, bufpool.go), given back only once its segment
//     file is written. Its frames are verified as its bytes arrive (a
//     frame.Verifier watching the read, so verification overlaps the
//     download); the verdict counts only once blobtier's length and digest
//     checks passed, so a damaged object is still a damaged object. Continuity is checked from each segment's summary:
//     ids consecutive from watermark segment + 1, sequences consecutive from
//     watermark sequence + 1. The first hole in id order stops the restore
//     with a *GapError naming the missing segment ids and sequences (and
//     whether tail objects cover them), unless AllowPartial, which keeps the
//     prefix before the hole and reports it.
//  5. The restored store's next segment id is above every segment id the
//     bucket has listed (orphans below the watermark and ids beyond a hole
//     included), so every downloaded segment is sealed and the store never
//     appends into an id that exists in the bucket: its own uploads can
//     never collide with old objects. localseg requires the ids on disk to
//     run consecutively from the reclaim base except across a recorded
//     jump: the restore keeps the bucket's ids and records each gap the
//     lineage allows (a cut's gap, an unused start segment) in the store's
//     jumps.json; a partial restore whose prefix ends below ids the bucket
//     holds beyond a hole fills the other ids with empty segment files
//     (Report.FillerSegments); they hold no frame and claim no sequence.
//     The recovered tail frames stay in the one active segment (up to
//     localseg.MaxSegmentBytes), which a takeover's jump moves whole.
//  6. Append the tail objects that go beyond the segments, in ascending
//     order, through AppendRecovered (the ordinary durable append path; one
//     fsync per 4 MiB of frames). Objects are read in parallel but applied
//     in order; at most Concurrency of them are held at once.
//  7. Apply the cursor object: its consumers, each clamped to the recovered
//     tip (clamped ones are reported), with the consumer frames positioned
//     at or after its shipped_through event replayed on top. The cursor
//     object was written after every frame before that event, so it is the
//     newer word on those: a consumer the restored frames carry but the
//     cursor object no longer lists was deleted by its owner (its
//     ConsumerDelete never shipped: a tail object ends at its last event),
//     and the restore deletes it too (Report.ConsumersDeleted). Frames after
//     that event may be newer than the cursor object, so a consumer created
//     after its last write is kept, and one whose ConsumerDelete the bucket
//     holds stays deleted; an Ack after that event does not bring back a
//     consumer the cursor object no longer lists (without a ConsumerCreate
//     after the event, the Ack predates the object's write). A cursor is
//     never lowered (a consumer the frames
//     carry further keeps its position). A consumer the cursor object
//     tombstones ("deleted") stays deleted unless a ConsumerDelete of it
//     after the event is followed by frames that create it again: its
//     ConsumerCreate may sit after the event in a sealed segment while its
//     ConsumerDelete never reached the bucket. A consumer deleted after the
//     cursor object's last write whose ConsumerDelete the bucket never got
//     comes back (a lost cursor update means redelivery, never loss);
//     deleting it again is the remedy. See consumers.go. Then check the
//     restore reached the cursor object's shipped_through (*ShortError
//     unless AllowPartial).
//  8. Fsync the directory once and rename it into place.
//
// A lazy hydrate (Options.Lazy, docs/FORMAT.md §9.4; lazy.go) downloads in
// step 4 only the newest segments within Options.LocalBytes and records the
// older ones as evicted from their metadata and the first event of each
// that a ranged read of its head gives (a hint, checked for plausibility,
// else left unknown: lazyfirst.go). The engine's Open uses it for an
// empty directory when Options.LocalRetentionBytes is set (in full
// otherwise), and so does `restore --lazy`.
//
// Steps 6 and 7 append to a side store, not to the restored directory:
// opening a directory without a checkpoint replays every segment, which
// would be a second pass over every frame just verified and cost as much
// as the verification. The side store lives in a subdirectory whose reclaim
// manifest puts its base at the end of the restored segments, so it opens
// empty, at once, with its first segment at the next id; when it is closed
// its segment files (and nothing else) move next to the restored ones. They
// are the files the restored store would have written itself. When nothing
// is appended the next segment is created empty instead. The restore writes
// no checkpoint.json (its format is the store's private business), so the
// first open of the result (the engine's, or ReadOnly's read-only one)
// replays it once.

// # What is verified where
//
//   - blobtier.Get checks every object's length and XXH64 against its
//     metadata: a short, long or flipped object is an error naming the key.
//   - frame.VerifySegment checks every frame of a segment (magic, length,
//     CRC, JSON) and that its sequences are consecutive (in the segment
//     phase a frame.Verifier, the same checks as the bytes arrive); tail objects get
//     the same checks frame by frame, plus their first and last event
//     against their key. Each object's frames are decoded once.
//   - Across objects: segment ids and sequences continue without holes;
//     tail objects continue the segments without holes.
//   - Overlaps: an event present in a segment and a tail object, or in two
//     tail objects, is recovered once and the frames are compared byte for
//     byte (a tail object overlapping a segment is compared while the
//     segment is in memory). Different bytes for one sequence are a
//     *ConflictError naming both keys: two writers. A tail object that adds
//     nothing is counted as superseded.
//   - Keys that do not parse, or name another shard or kind, are never read
//     (they are listed in the report). Objects of other shards and other
//     prefixes are never listed at all.
//
// A corrupt object is always an error naming its key (ObjectError, matching
// ErrCorrupt), never a silently shortened replay; AllowPartial steps over
// holes, not over corruption or conflicts. The one exception is a tail
// object whose every event an intact later object also holds (its owner
// found it damaged and shipped its events again under another key, also
// when a segment object holds part of its range): Hydrate passes over it;
// had it held an event no intact object holds, the restore fails with its
// error. A damaged tail object whose key and `epoch` metadata alone put it
// off the lineage (a stale writer's put that landed damaged) is a zombie:
// skipped and counted like an intact one (damagedtail.go). And a damaged
// tail object with no object after it whose events no intact object holds
// is skipped when an intact cursor object's shipped_through lies below all
// of them (an owner's put that landed damaged and was never put again):
// never reported shipped, garbage must not brick the restore; the report
// names it (Report.DamagedTails) and a warning is logged. A damaged
// segment object is passed over only when it is the last one listed and
// the tail objects bring the restore to an intact cursor object's
// shipped_through, or when the next segment starts where it would have
// started (it held no event) and shipped_through is at or above that
// start (damagedseg.go, Report.DamagedSegments, a warning); its id is
// recorded as a jump of the restored store.
//
// # After a partial restore
//
// AllowPartial salvages the prefix; the bucket still holds whatever lies
// beyond the hole. The restored store will write new events under those
// sequences and, in time, segments under those ids: its uploads then find
// different objects under the same keys, which the shipper treats as a
// second writer. Before the restored store ships, remove the shard's
// objects beyond the restored tip from the bucket (or ship to a new
// prefix). A hole whose sequences tail objects cover (GapError.
// CoveredByTail) loses no event: the tail objects continue the prefix.
//
// # A live owner
//
// A non-owner reads while the owner keeps sealing, uploading, reclaiming and
// cleaning up. Those can make a listed object vanish, open an apparent hole
// (a reclaim between the watermark read and the listing; a tail cleanup
// after a seal the segment listing missed) or leave the restore short of
// shipped_through. When an attempt fails that way and a fresh look at the
// bucket differs from the one the attempt used, the restore starts over
// (Options.MaxAttempts, default 3). A hole in an unchanged bucket is
// reported at once.
//
// # Crashes
//
// Hydrate builds the store in a sibling directory `.<name>.hydrating` and
// renames it onto the target only when it is complete (after the store was
// closed, then an fsync of the parent), so a crash never leaves a
// half-hydrated shard that looks complete: the target is either absent (or
// still the empty directory it was) or the whole store. A rerun takes the
// lock `.<name>.hydrate.lock` in the parent, removes any leftover
// `.hydrating` directory and starts from the bucket again; the lock file
// itself stays (removing it would race with a concurrent rerun). Nothing in
// the leftover is ever trusted. The bucket is never written. A failed fsync
// anywhere fails the restore; the one failure that leaves the store in
// place is the parent directory's fsync after the rename: the store is
// complete, and the error says its publication may not be durable.
//
// Durability: each restored segment file is fsynced once (written, fsynced,
// renamed within the scratch directory); the append store's own barriers
// are skipped and each of its segment files is fsynced once, when it is
// closed; the scratch directory is fsynced once before the rename and the
// parent once after it.
//
// Not handled: a target directory that an engine has already opened (and so
// filled with an empty store) is not empty and is refused; the caller must
// decide to restore before opening.
//
// # Ownership
//
// Whether this process may hydrate a shard (it owns it) is the engine's
// decision, taken before calling Hydrate. What this package enforces: it
// never writes over a non-empty directory, never into a directory named for
// another shard, and ReadOnly's store refuses every write. A non-owner read
// therefore cannot change anything, locally or in the bucket.
//
// # Verify
//
// blobtier lists one shard and kind at a time; there is no listing of the
// whole bucket, so Verify walks the shards it is given (VerifyOptions) and
// names them in its report. It also lists the shard's index objects
// (docs/FORMAT.md §6.10) and checks each against its segment object
// (verifyindex.go): usable, unusable or orphaned, never a problem (they are
// derived). Hydrate and restore never read index objects; a lazily hydrated
// store reads them on demand (localseg indexobj.go).
//
// # Concurrency
//
// Hydrate, ReadOnly and Verify are safe to call concurrently for different
// targets. A second Hydrate of a target whose restore is running fails at
// once on the lock (localseg.ErrLocked). The Progress callback is never
// called concurrently with itself.
package coldload
