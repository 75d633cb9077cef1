// Package drives holds the self-check drives of the seeds as library
// functions: each runs a deterministic scenario against the real stores and
// returns a report that marshals to the JSON the seeds show, plus Holds().
// The CLI prints the report and exits 0 only when it holds (1 otherwise);
// an error return means the drive could not run (ErrUsage: it refused its
// input, exit 2; anything else is a storage or state error).
//
//   - Recovery (durable-eventlog-recovery): append, ack, restart, prove zero
//     loss, ordering, scope, payload fidelity and cursor survival.
//   - Affinity (durable-eventlog-affinity): the single-writer drive over a
//     pool of replicas sharing one root.
//   - AffinityAppend and AffinityRead (durable-eventlog-affinity-append and
//     -read): one routed operation by one replica, with the routing decision
//     in the outcome (the CLI exits 6 when an append is refused).
//   - Shared (durable-eventlog-shared): a pool of engines (the root package),
//     each owning one shard on a local disk of its own, over one bucket:
//     shared miss, owner publish, non-owner cold load, parity, and crash
//     recovery from the bucket alone.
//   - DriveGC (durable-eventlog-gc): append, ack three quarters, one local
//     reclaim pass: bounded growth, gapless from the base, restart.
//   - DriveSharedGC (durable-eventlog-shared-gc): a pool over one bucket;
//     the owner of shard 0 reclaims locally and in the bucket, and a
//     non-owner's cold load and a new owner's hydrate agree with it.
//
// # Inputs
//
// A drive writes only into a fresh root: an empty root string, or a root
// that already holds any entry, is refused, so a drive never mixes its
// events with real data (or reads real data as its own). The recovery drive
// also refuses an empty event set (the exported Recovery always brings its
// own three events) and a consumer name that is not an identifier; the
// affinity drive refuses fewer than 2 shards (one shard has no non-owner to
// refuse) and more than MaxAffinityShards. The shared drive also refuses a
// bucket that already holds any object of its pool's shards, so it never
// mixes with (or hydrates) someone else's history.
//
// # Crash assumptions
//
// The "restart" of a drive closes every store and opens fresh ones over the
// same directories, so nothing survives in memory. The affinity drive also
// deletes every checkpoint.json first, as a crash could leave them stale,
// so the recovery it proves is a replay of the segments. The shared drive's
// crash cuts the owner's writes to the bucket before it closes its engine
// (a killed process ships nothing at exit) and then deletes its whole local
// directory, so what the new engine holds came from the bucket alone.
//
// # Concurrency
//
// Drives are not meant to run concurrently on the same root; different roots
// are independent. The one-shot verbs open one replica each and take its
// shard's lock, so they fail (localseg.ErrLocked) while a server owns that
// shard.
package drives
