// Package affinity routes a sharded event log so that every shard has
// exactly one writer (docs/FORMAT.md §5).
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
// # Routing
//
// The package is pure functions and types: ShardFor, Ownership (Owns,
// OwnerOf, Decide), the not-owner refusal (*NotOwnerError, errors.Is
// ErrNotOwner, naming the owner shard) and the read-only view of a shard
// owned elsewhere (Reader, ColdReader, LocalColdReader: a shard directory
// that does not exist reads as empty and is not created), and the owned
// shard's store opened with its pair (Ownership.OpenStore). The engine (the
// root package) routes once: it refuses an event of another shard's
// execution before any store is touched, so re-routing it never duplicates
// it, and serves reads of another shard by a cold load. Identifier and
// UTF-8 validation happen before routing, so an invalid event is
// invalid_input on every replica. The routed replica the affinity drive
// exercises lives in internal/routed.
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
// Everything here is pure and safe for concurrent use; each cold
// load opens and closes its own read-only view.
package affinity
