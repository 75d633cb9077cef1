// Package tailbatch ships the unsealed tail of a shard's local log to the
// bucket as write-once tail objects (docs/FORMAT.md §6.4, §7.2).
//
// # Why
//
// A sealed segment reaches the bucket after it seals; until then its events
// exist only on the local disk. On every tick the engine asks a Replicator
// for the frames that became durable since the last shipped position and
// puts them, verbatim, as one object under
// noetl.ehdb.tail.<shard>.<first_seq>.<last_seq>. A cold load replays those
// objects after the segments, so the bucket alone holds the log up to the
// last tick.
//
// # The tick is the loss window
//
// Tail replication does not make an append wait for the bucket. An event
// appended just after a tick is on the local disk only, until the next tick
// ships it: if that disk is destroyed in between, the event is lost. The
// worst-case loss window is therefore the tick interval (15 s by default),
// not zero, and that interval is the number to quote. (The engine's
// synchronous mode, which makes an append wait for its tail object, is the
// only way to close the window.)
//
// # Contract
//
//   - A batch is a byte range of one local segment, whole frames, every byte
//     covered by a completed fsync (the Source's TailExtent guarantees it;
//     nothing beyond it is ever read). Batches never span two segments and
//     are at most Options.MaxBatchBytes (8 MiB) long, cut at an Event frame
//     boundary; a single larger Event frame ships alone. Consumer frames
//     ride along verbatim; the key names the first and last Event.
//   - The cursor (ShippedThrough) is the highest sequence the bucket holds
//     contiguously. It moves only forward, only by Commit of a batch that
//     starts at or before cursor+1, or by Advance when the engine learns
//     that sealed segments through a sequence are durable in the bucket.
//   - Fail leaves the cursor, counts the failure, and the next Prepare
//     returns the same events again under the same key (or a longer batch
//     starting at the same sequence, when more arrived meanwhile).
//   - Tail objects are created with create-if-absent and epoch 0. An
//     identical object under the key is success (a retry after a lost
//     acknowledgement). A different one is a second writer on the shard:
//     Upload returns an *UploadError matching blobtier.ErrConflict, Fail
//     latches it, and every later Prepare returns a *StoppedError (matching
//     ErrStopped and blobtier.ErrConflict) instead of shipping again —
//     unless the driver's Hooks.Conflict says the occupant is an object that
//     stays (ErrOccupied: a stale writer's, under writer fencing): then the
//     same events ship as a batch one Event shorter, under another key.
//   - An idle shard costs nothing: when no new Event is durable Prepare
//     returns no batch, and Replicate issues no request at all unless the
//     cursor object is behind the cursor or the consumers changed.
//   - The cursor object {"v":K,"shipped_through":S,"consumers":{…}} is
//     written after the tail puts of a pass succeeded, by compare-and-swap
//     (or a plain put on buckets without it). It never points past what the
//     bucket holds: S is the cursor, every consumer is clamped to S, and S
//     never moves backward. Its "deleted" tombstones name consumers deleted
//     whose ConsumerDelete may sit after event S (from the store's
//     Snapshot.Deleted and the consumers the last object listed), until S
//     passes the delete; WriteCursor alone makes none (tombstone.go).
//   - At start the cursor comes from CursorFrom: what the bucket holds
//     contiguously from the reclaim base, never the local tip. The cursor
//     must never sit below the local reclaim base: the engine calls Advance
//     when segments become durable in the bucket (only those are reclaimed
//     on a shipping store). A cursor left below the base makes Prepare
//     return ErrBadExtent rather than name sequences it cannot read.
//   - Options.Disabled ships no tail object; Replicate then writes only
//     the cursor object, when it is due.
//
// # The lock boundary
//
// Appends take the store's lock. Nothing in this package holds that lock
// across bucket I/O:
//
//	Prepare   no bucket I/O; TailExtent takes the store's lock briefly
//	Upload    a free function: reads the immutable range, verifies it, puts it; no lock
//	Commit    in memory only (the replicator's own mutex)
//	Fail      in memory only
//
// Replicate is the three in one call and keeps the same boundary, so a
// driver may call it on a timer next to appends. A slow or refusing bucket
// delays the next tick, never an append, and never fails one.
//
// # Crash assumptions
//
// The replicator keeps its cursor in memory only. After a crash the bucket
// is the truth: CursorFrom finds the contiguous coverage there, so events
// acknowledged before the crash but not yet shipped are shipped on the next
// pass. A crash after a put but before Commit re-ships the same bytes under
// the same key, which the bucket answers as success. Tail objects may
// overlap each other and sealed segments (a longer retry, a segment that
// sealed after its tail shipped); a cold load de-duplicates by sequence.
// The cursor object is a lower bound: losing an update of it means
// redelivery to consumers, never loss.
//
// # Concurrency
//
// A Replicator is safe for concurrent use. One driver per shard is
// expected to run passes in sequence; two concurrent passes stay correct
// (the cursor never moves backward or over a gap) but may put the same
// object twice. Upload, CursorFrom, ReadCursor and WriteCursor are free
// functions, safe for concurrent use given concurrency-safe arguments.
//
// A tail object counts as shipped only once Upload read it back intact. One
// of ours that reads back damaged (twice: a read can be damaged on the way)
// is deleted and put again in the same call; if that fails too the batch
// fails with ErrDamaged, never as a second writer, and the next pass ships
// the same events. UploadKeeping never deletes: the damaged object stays
// and the upload fails (the uploader's bridge of a damaged segment object,
// whose tail objects may be the last copies of its events).
package tailbatch
