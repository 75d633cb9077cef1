// Package localseg is the durable local segment store of one shard (docs/FORMAT.md
// §2–§4): an append-only log of CRC-framed events and consumer state in
// segment files, made durable with fdatasync before an append returns,
// recovered after a crash without losing an acknowledged event, and read
// through an in-memory index of locations.
//
// # Wire format
//
// Everything in this section is part of the wire format; do not change it.
// Segments and tail objects in the bucket hold these bytes verbatim.
//
// A segment file is a sequence of frames. All integers are little-endian.
//
//	offset  size  field
//	0       4     magic 0xE5DB0001 (bytes 01 00 db e5)        FrameMagic
//	4       4     body length n (readers accept up to 64 MiB) MaxBodyLen
//	8       4     CRC-32 IEEE of the body only
//	12      n     body                                        HeaderSize = 12
//
// The body is the compact JSON of one externally tagged variant, fields in
// this order:
//
//	{"Event":{"global_sequence":N,"execution_id":"…","transaction_id":"…","payload":"…"}}
//	{"ConsumerCreate":{"consumer":"…"}}
//	{"Ack":{"consumer":"…","sequence":N}}
//	{"ConsumerDelete":{"consumer":"…"}}
//
// Writers produce exactly serde_json's compact output: strings escape only
// '"', '\\' and control characters (\b \f \n \r \t by name, the others as
// \u00XX with lowercase hex); everything else, '<', '>', '&', DEL, U+2028
// and U+2029 included, is raw UTF-8; no trailing newline. The two golden
// vectors of docs/FORMAT.md §2.5 are testdata/golden_frames.bin. Readers accept any
// valid JSON encoding of a variant (whitespace, field order, unknown fields,
// escapes); an unknown variant, a missing field, a lone surrogate or
// invalid UTF-8 anywhere in a body is corruption — nothing is ever decoded
// into something other than what was written. No body is empty and no
// valid body contains a zero byte (JSON text escapes control characters);
// recovery relies on both.
//
// A store directory holds seg-<16-digit decimal id>.eslog, checkpoint.json,
// reclaim.json and LOCK, and (a cache, docs/FORMAT.md §3.6) seg-<id>.idx beside
// sealed segments (see Read index), and (beyond the seeds' format) shard.json, the shard
// pair the store was written as: recorded by the first writable open told
// a pair (Options.Shard), right after the first segment, and compared by
// every open told one, which refuses another pair with ErrShardMismatch
// before changing anything (see shardpair.go). Segment ids start at 1 (after a reclaim, at the
// reclaimed id + 1) and are never reused. They run consecutively except across a jump recorded
// in jumps.json ({"jumps":[{"from":F,"to":T}]}: ids F..T-1 hold no segment; docs/FORMAT.md
// §3.12): JumpTo (a takeover's start_segment) and a cold load (RecordJump, the bucket's gaps)
// write it durably before any segment at or above T exists, so a gap is legal exactly where the
// store recorded it and a lost segment file anywhere else (or a lost jumps.json) still refuses
// the open. A crash between JumpTo's record and its rename is finished by the next writable open. A frame never spans two segments:
// before a frame of F bytes, a non-empty active segment with len+F above
// SegmentMaxBytes (default 8 MiB, at most 15 MiB) is sealed and the frame
// starts the next. checkpoint.json carries, beyond the seeds' fields (docs/FORMAT.md §3.4),
// a crc32 member over the rest (see checkpoint.go): it is rewritten in place
// without fsync, and a torn rewrite must fail to parse. reclaim.json is
// {"reclaimed_through_seq":N,"reclaimed_through_segment":M}.
//
// # Crash assumptions
//
// The store is correct on a filesystem that behaves no better than this:
//
//   - A write is not atomic, not even within a sector: after a crash, any
//     sector of a write that no completed fsync covered may hold the new
//     bytes or what was there before. Only fsync (fdatasync for data)
//     makes bytes durable.
//   - A new or renamed directory entry is durable only after an fsync of
//     its directory. The store fsyncs a file before the directory that
//     names it. A writable open fsyncs the store directory's parent, and
//     the directory itself unless a trusted checkpoint proves it was
//     synced (a checkpoint names a segment only after the directory fsync
//     that made it durable): an earlier process may have died between
//     creating an entry and syncing it.
//   - A file's reported size is not trusted: preallocated space, and a size
//     change that outlived its data, read as zeros; a file may end early.
//     Recovery decides from the bytes, never from the size.
//   - After a failed fsync, Linux may have dropped the dirty pages and
//     marked them clean: the next fsync reports success without writing
//     them, while reads still return them. So a failed write or fsync
//     poisons the store (every later write fails with ErrPoisoned until it
//     is reopened), it is never retried-and-acknowledged, and a reopen
//     re-writes and fdatasyncs every byte it keeps that a checkpoint does
//     not vouch for.
//
// # Durability and group commit
//
// An append returns only after the fdatasync covering its frame. Appends
// arriving while a write is in flight queue into the next group: under the
// store's mutex an appender takes its sequence and encodes its frame into
// the pending group's buffer; the first appender to find no write in flight
// leads the group: it writes the frames with one positional write (WriteAt,
// never O_APPEND) per segment, fdatasyncs once, publishes the new durable
// state and wakes the group. A group that fills the active segment seals
// it on the way (truncate to the logical end, fsync, create and preallocate
// the successor, fsync the directory, rewrite and fsync the checkpoint) and
// writes the rest into the successor. Every member of a failed group gets
// the error, except those whose frames an fsync already covered (a seal's,
// when the successor then cannot be created, or when the checkpoint the
// seal rewrites, the durable record that the successor exists, cannot be
// written: then nothing more goes into the successor): they are durable,
// and an error would make a retry store them twice. Likewise the work after a
// group's fdatasync (the checkpoint write, preparing the spare segment)
// never fails that group: a failed checkpoint write poisons the store for
// later appends only (Store.Poisoned says so at once, and the Log's
// readiness asks it), and a failed spare or preallocation (ENOSPC, EIO) is
// logged and does not poison at all (the successor is then created at the
// rollover, growing as it is written). The hot path allocates nothing
// beyond amortized buffer growth.
// Readers see only durable state.
//
// # Preallocation
//
// The active segment is preallocated to SegmentMaxBytes when it is created
// (Options.NoPreallocate turns this off), so an fdatasync of an append only
// flushes data, not a new file size or extent state. The choice between
// fallocate(2) and writing zeros once was measured on this machine (ext4
// on a virtual disk, 2 vCPUs; fdatasync of an overwrite ~60 µs when idle):
//
//	appends/s, write+fdatasync loop     frame ~270 B   frame ~4.1 KiB
//	plain growing file                  11.4k          7.6k
//	fallocate (unwritten extents)       15.9k          9.2k
//	zeros written once, then fsynced    14.4k          12.7k
//
// fallocate leaves unwritten extents: the first write into each block must
// convert it, a metadata change the fdatasync has to commit through the
// journal, which costs most when each append touches a new block. Zeros
// written once (about 9 ms per 8 MiB segment, amortized over the segment)
// make every later append a pure overwrite: 1.26x and 1.67x the plain loop,
// against 1.39x and 1.21x for fallocate. The store writes zeros. The unused
// tail reads as end-of-log (a zero header) and sealing truncates it away;
// SegmentInfo.Size and every range report the logical size.
//
// # Recovery
//
// Open lists the segments (those at or below reclaim.json are deleted
// unread by a writable open, skipped by a read-only one; a missing id in
// between, outside a recorded jump, is corruption). With Options.DeferCleanup those deletions (and
// of unfinished temporary files), and the highest segment's repair below,
// wait for RemoveLeftovers (or the first write): the engine calls it once
// the bucket's verdict lets its open go on. A store whose own durable records show more than
// its files hold is refused, writable or read-only, before anything is
// changed (ErrLostState, an ErrInvalidState, naming the evidence and the
// way to rebuild from a bucket): a parsing checkpoint naming a segment above
// the highest file, or counting more events than the files hold; the index
// file of a segment with no successor; segment files left at or below
// reclaim.json with none above; a checkpoint.json file, parsing or not, with
// no segment file at all (it is created only once the first segment is
// durable). A shorter log would give the lost sequences
// to new events. None of this is evidence: a checkpoint that does not parse
// (beside a segment file),
// a new segment it does not name yet, leftovers below a retained segment,
// reclaim.json alone (a cold load's base). A read-only open reads the
// checkpoint before listing, and reads again before it reports a loss, so a
// live writer's rollover is not mistaken for one. Then, when checkpoint.json names the highest
// segment and no frame starts at its active_len (end of file or zeros),
// trusts it and replays nothing: open is O(1) in the log's length (beyond
// the transaction window's rebuild, bounded by the window), and the
// read index is built by a full replay (every CRC, gapless sequences) on the
// first read. A frame at active_len means appends the checkpoint missed:
// replay runs from active_len forward only. Otherwise every segment is
// replayed. In sealed segments anything invalid is corruption
// (*CorruptionError naming the segment and offset; errors.Is ErrCorrupt),
// never repaired. In the highest segment a torn tail — fewer than 12 bytes
// left, a zero header, a body past the end of the file, or a damaged last
// frame carrying the marks of a lost sector or starting at/after a trusted
// checkpoint's active_len, or a frame whole but for the head of its magic
// lost with the sector before a boundary (a batch whose first sector was
// lost and later ones landed, whole frames after it included) — is
// dropped: the writable owner truncates it, re-writes and fsyncs what it
// keeps, and reports the dropped bytes
// (OpenReport.TornTailBytes, counted up to the last non-zero byte); a
// read-only open serves the prefix and changes nothing. The exact rules,
// and why each is safe, are on isTornTail in recover.go. A whole frame with
// a valid CRC but bad JSON or a sequence gap is always corruption. A
// writable open with a trusted checkpoint still reads the unused
// preallocated tail of the active segment once (at most SegmentMaxBytes)
// to prove it holds only zeros: leftovers of an interrupted write are
// truncated away, so later appends never sit in front of stale bytes; and
// it re-writes and fsyncs the trusted checkpoint (read back from the page
// cache, its fsync may have failed), the only durable record of the
// segment it names, before any frame goes there.
//
// # Retry-safe appends
//
// A writable store remembers the transaction ids of its newest
// Options.TransactionWindow events (DefaultTransactionWindow = 100,000;
// negative: off, and a repeated id appends again as the seeds' store did).
// An append whose id the window holds is not written: the same execution
// id and payload answer the original sequence with AppendResult.Duplicate,
// other content is refused with ErrTransactionConflict (an
// ErrInvalidState) naming the sequence; AppendEvents checks each event of
// a batch, an id repeated inside the batch included, lists the duplicates
// and refuses the whole batch on a conflict. The check and the sequence
// assignment are one step under the mutex, and an event is remembered when
// it is queued, so two racing appends of one id (one group, one batch) are
// never both written; a retry of an event in flight waits for its group.
// The window is exactly the newest N events above the reclaim base: a
// reclaim forgets the ids it removed, and every writable open rebuilds it
// from the newest frames on disk (reading segments backwards until N
// events, so open stays independent of the log's length), which is what
// carries it across a restart, a crash, a hydrate and a restore. After a
// lazy hydrate it covers the newest window's events: the open fetches
// the evicted segments the window needs beyond the local ones. A damaged sealed segment ends the rebuild there
// (logged; reads report the corruption). An entry costs 34 bytes (two
// keyed 64-bit hashes of the id and a keyed 64-bit hash of the content in
// a ring, a 4-byte slot of a table at most half full; at most 48,
// TestTxWindowMemoryPerEntry), about 3.4 MB for a full default window.
// See txwindow.go.
//
// # Read index
//
// Locations only, never payloads: per segment the first sequence and a
// packed 3-byte offset per event; per execution its sequences as varint
// deltas with an anchor every 128. At 1M events over 10k executions that is
// about 6.8 bytes an event, maps included (IndexBytes reports it). A read
// locates frames through the index and reads them with ReadAt, coalescing
// adjacent frames; a per-execution read never scans the log.
//
// Index files. A sealed segment's part of the index (offsets, execution
// ids, consumer frames) is also kept in seg-<id>.idx, written by the
// writer when it seals a segment it wrote from its first byte, or by a
// writable store's replay after it validated the whole segment. It records
// the segment's length and the xxh64 of its bytes, and a replay uses it only
// when the segment, read in full, still hashes to that: the bytes are then
// exactly the ones written or validated, so every frame in them is valid.
// Any change to the segment (a flipped bit, a torn or foreign write) sends
// it to the frame-by-frame replay, so corruption is reported as without the
// file, at the first read. A missing, torn, stale or foreign index file
// costs a full replay of its segment and nothing else (and a writable store
// then writes a valid one); it is never fsynced, reclaim removes it before
// its segment, a writable open removes those at or below reclaim.json, and
// a read-only open never writes one. Every read still checks each frame's
// CRC, and a per-execution read checks each record's execution id.
//
// # Eviction (tiered storage, issue 16: first slice)
//
// Built: Store.Evict (evict.go) moves the oldest sealed segments off the
// disk while the sealed segments on disk exceed a budget, each only when
// the caller (the shipper: verified and read back) says its bucket copy is
// durable, stopping at the first that is not; the active segment never
// goes. Per segment: hash it and make its index file valid (index files of
// evicted segments stay on disk, so an index build and a per-execution read
// fetch only the segments they need), then commit evicted.json (id, length,
// xxh64, first event; writeDurably, docs/FORMAT.md §3.11) — the point of no
// return — then unlink and fsync the directory. A crash before the commit
// evicts nothing; after it the next writable open sweeps the file like a
// reclaim leftover (with DeferCleanup, at RemoveLeftovers). A failed commit
// poisons the store, as a failed reclaim.json does. Eviction is not
// reclaim: an evicted event exists and reads back (Scan, ReadExecution,
// Get, Pull and everything above them) from the bucket through
// Options.Remote, checked as a restore checks an object: length and xxh64
// against evicted.json, every frame (CRC, body, sequences; checked by a
// frame.Verifier as the bytes arrive when the source is a WatchedSource,
// its verdict read after the length and digest checks); a bounded LRU
// (Options.RemoteCacheBytes) keeps fetched segments, one fetch per segment
// at a time. A sequential read (Scan, Pull and the reads streams make)
// fetches the evicted segment after its page's last one ahead, in the
// background (within the read with Options.ReadAheadInline): at most one
// such segment beside the cache; a page holds the cached copies it reads,
// and those copies, verified once at the fetch, are read in place without
// a second CRC pass. Per-execution reads never read ahead. Any failure of such a read is ErrRemoteRead (a storage error,
// 503; never ErrCorrupt, never a short page, never sticky: the next read
// tries again). A reclaim of an evicted range removes it like any other
// (its index file; there is no segment file); entries at or below
// reclaim.json are stale and ignored. At open a missing segment file is
// accepted only when evicted.json names it; a record naming the active
// segment or beyond, or evicted segments with no segment file left at all,
// is ErrLostState; a record that does not parse is ErrCorrupt. The
// transaction window's rebuild at open reads evicted segments from the
// bucket too (bounded by the window); when the bucket does not serve one,
// the open goes on (reads work) but the store is poisoned for writes
// (ErrPoisoned wrapping ErrRemoteRead) until a reopen finds the bucket
// answering: a window missing those ids would write a retry twice.
//
// A store being built can record segments it never held as evicted
// (evictimport.go: ImportEvicted, with the length, xxh64 and first event
// the bucket's object has; ImportCheckpoint, with the tip read from the
// newest local segment, so the open replays nothing): the hook of a lazy
// hydrate (the first event may be 0, not known; the entries are marked
// imported, and their consumer frames are left to the imported checkpoint
// by every replay: imported.go). Such a store opens
// fetching only what the transaction window needs beyond its local
// segments. Its index is built lazily per segment (lazyindex.go): an
// evicted segment without a valid index file stays pending, unread, until a
// read by sequence needs it (O(log n) fetches to find a sequence deep in
// the history); a per-execution read builds the index in full, fetching
// each pending segment once and writing its index file. With a remote
// source that also serves index objects (IndexSource, indexobj.go;
// docs/FORMAT.md §6.10) a pending segment is first located from its index
// object, used only when it records the length, xxh64 (and, when known,
// the first event) evicted.json holds for the segment: then only the
// segments a read needs are fetched (a per-execution read fetches the
// index objects eight at a time, and then only the segments holding the
// execution); anything else falls back to fetching the segment. While segments are
// pending the index build checks the consumers and (when no event follows
// them) the tip only against the checkpoint's word; the full build checks
// them against every frame. A lazy hydrate records its remote segments with
// the first event their heads gave it, or not known (FirstUnknown,
// evicted.json first 2^64−1) where they did not: the
// store reports such a segment as holding no event until a read resolves
// it, and refuses (ErrInvalidState, before any change) a reclaim whose end
// falls right before one, whose last event it could not know. A writable
// open with Options.ResolveFirsts (the engine's owner) resolves every one
// before recovery changes a byte, or is refused with ErrRemoteRead
// (resolvefirsts.go).
//
// Self-healing (heal.go): a local sealed segment a read finds corrupt is
// replaced by its bucket copy when the shipper holds the object durable
// (SetHealCheck) and the copy has the segment's length, the xxh64 its
// index file recorded (when it has one) and frames that all verify; the
// replacement is an eviction, recorded durably before the corrupt file is
// unlinked. A writable open whose full replay, or probe of a segment's
// first event, meets such a segment reads the verified copy instead and
// changes nothing for it (the owner's start replaces it). One with no good
// copy keeps answering ErrCorrupt and is reported by Unhealed; a bucket
// failing the fetch is ErrRemoteRead; a poisoned store answers its poison.
//
// Not built yet (later sessions): ranged GETs (whole segments are
// fetched, also by a per-execution read that needs a few events of one),
// paging out evicted segments' index entries (they stay in memory, about
// 7 bytes an event). Index objects (indexobj.go) are built.
// An evicted segment whose bucket object is not listed with its metadata
// stops the owner's start (shipper/evict.go: retried like a failing
// bucket, then refused naming the segment; ErrDiverged when it differs),
// not repaired.
//
// # Decisions docs/FORMAT.md leaves to this package
//
//   - Page.Clamped is true when some records after the cursor were
//     reclaimed (after < reclaimed-through); a cursor at the base is not
//     clamped. Exists is false for an empty store, and for a per-execution
//     read of an execution with no retained event.
//   - A limit of 0 returns counts without records; a negative one is
//     ErrInvalidInput. Get of 0 or above the tip is ErrNotFound.
//   - A pull that would create a consumer beyond Options.MaxConsumers
//     (DefaultMaxConsumers, at most MaxConsumersCeiling) is refused with
//     ErrConsumerLimit and writes nothing; replay and recovered frames are
//     never limited (consumerlimit.go). A pull that creates one logs it.
//     A first pull reads before it creates: a failed read (a segment that
//     cannot be read, locally or from the bucket) creates no consumer.
//   - Ack validates against the durable tip and is refused with
//     ErrReadOnly on a read-only store even when it would be a no-op. A
//     read-only store serves pulls of existing consumers and refuses to
//     create one. An Ack frame (re)creates its consumer on replay, which is
//     what lets reclaim's write-forward carry consumers across.
//   - Segment ranges (SegmentInfo.FirstSeq/LastSeq) come from each segment's
//     first event, known after any replay, for segments this process made,
//     and probed (reading up to the first event; cached, sealed segments
//     are immutable) after an O(1) open — Snapshot never forces the replay.
//   - WriteSegmentFile writes through a temporary name and a rename, so a
//     crash never leaves half a segment under a segment name.
//
// # Concurrency
//
// A *Store is safe for concurrent use by any number of goroutines. One
// mutex guards the head state (sequences and consumer cursors as queued)
// and the durable state (tip, consumers, segments, index); slow I/O runs
// without it: the group leader, Seal and Reclaim hold a "writer role"
// instead, which serializes writers but not readers or appenders queuing
// the next group. Reads copy locations under the mutex and read files
// without it. A writable store holds an exclusive flock on LOCK; a second
// writable Open fails at once with ErrLocked. The package functions
// (EncodeFrame, DecodeFrame, Frames, VerifySegment, which are package
// frame's codec under the store's names; WriteSegmentFile, the manifest
// functions) are safe for concurrent use on distinct data.
package localseg
