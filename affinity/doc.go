// Package affinity routes a sharded event log so that every shard has
// exactly one writer (SPEC §3).
//
// # Ownership
//
// ShardFor maps an execution id to a shard of a pool of n: an id that parses
// as a decimal int64 is hashed as its eight little-endian bytes, any other id
// as its UTF-8 bytes, with XXH64 seed 0, modulo n. The function is the one the
// workers and servers of the seeds use, so an execution's events land in the
// shard of the replica that runs it. Ownership{Index, Count} says which shard a
// replica owns; ParseOwnership builds it from NOETL_SHARD_INDEX and
// NOETL_SHARD_COUNT (or flags): both unset is the single owner (shard 0 of
// 1); a partial or invalid pair is a configuration error, never a silent
// fallback to shard 0, because that would make a second writer of shard 0.
//
// # The routed log
//
// A Log is one replica. It opens its owned shard's store,
// <root>/shard-NNNN, writable and keeps it resident until Close; the store's
// lock makes a second writer of the same shard fail at Open. The store
// records the pair it is written as (localseg Options.Shard; a store
// without a record adopts the pair of this Open), and Open refuses a store
// written as another pair (another shard count) as an ErrConfig error,
// before changing it. Then:
//
//   - Append and AppendBatch of an execution owned elsewhere are refused with
//     a *NotOwnerError naming the owner shard (errors.Is ErrNotOwner). The
//     refusal happens before any store is touched: nothing is written and no
//     sequence is consumed, so the caller may re-route the event to its owner
//     without risk of a duplicate. A batch with any invalid or non-owned event
//     is refused whole.
//   - Read and ScanShard are served by the owner's resident store, or, for a
//     shard owned elsewhere, by a cold load: a ColdReader opens a read-only
//     view of that shard for the one read. The default opens
//     <root>/shard-NNNN read-only with localseg, which never truncates or
//     repairs anything, so a non-owner read cannot change another owner's
//     shard; a shard directory that does not exist reads as empty and is not
//     created. The root engine plugs in a ColdReader that loads from the
//     bucket. ReadResult.ServedBy says which path served the read.
//   - Pull, Ack and DeleteConsumer move writer state (consumer cursors), so
//     only the shard's owner may; any other replica is refused.
//
// Identifier and UTF-8 validation happen before routing, so an invalid event
// is invalid_input on every replica. The size limit depends on the owner's
// segment size and is checked by the owner's store.
//
// # Assumptions
//
// Single writer: the pool is configured so that each shard index is held by
// one replica at a time. Within one machine the store's flock enforces it;
// across machines nothing here prevents two replicas configured with the same
// index from writing two histories (writer fencing is not built; the bucket
// tier detects a second writer). Durability is the owner store's: an append
// returns after its fsync.
//
// # Concurrency
//
// Ownership, ShardFor and the decision labels are pure. A Log is safe for
// concurrent use: the resident store serialises its own writes, the Log's
// lock only keeps Close from racing with operations, and each cold load
// opens and closes its own read-only view.
package affinity
