// Package reclaim decides which segments of a shard may go and removes them:
// locally, across the bucket (behind the reclaim watermark), and the tail
// objects a durable segment has superseded.
//
// # Plan (docs/FORMAT.md §8.1)
//
// MakePlan is pure: from a localseg.Snapshot, a Policy and a "durable in the
// bucket" function it computes what a pass removes and why.
//
//   - The interest ceiling is the lowest cursor over the live consumers (a
//     consumer that never acked counts as 0). No consumer: no ceiling. A
//     deleted consumer is not in the snapshot, so it stops holding GC.
//   - With keep-last-N (Policy.MaxRetainedSegments, raised to the floor) the
//     boundary is min(retention target, ceiling): retention bounds a store
//     nobody consumes, and never runs ahead of a live consumer. Without it
//     the boundary is the ceiling, and with no consumer nothing goes.
//   - The plan takes the longest prefix of segments, in id order, each
//     sealed, each ending at or below the boundary and, when durable is
//     non-nil, each durable in the bucket, keeping at least
//     Policy.MinRetainedSegments (default 2, the active segment counted).
//     It stops at the first segment that fails, and names it: Plan.Stop,
//     Plan.Rule, Plan.Consumer and Plan.Reason say which rule or consumer
//     holds the boundary; Plan.Lags gives every consumer's lag.
//   - A Policy with Enabled false plans nothing. ParsePolicy reads the
//     NOETL_EHDB_EVENTLOG_GC* variables fail-safe: anything unset, empty or
//     unrecognised keeps the default, which never deletes more. An
//     operator's explicit gc builds Policy{Enabled: true, ...} itself.
//
// # Local reclaim
//
// Local (and Pass = snapshot + plan + Local) calls localseg.Store.Reclaim,
// which carries the crash-safe order: write-forward of every consumer's
// Ack, fsync; commit reclaim.json (temp, fsync, rename, directory fsync);
// unlink; rebuild the index. A crash before the manifest commit reclaims
// nothing; after it, the next open deletes the leftovers (never reading
// them) and honours the base. A read-only store refuses
// (localseg.ErrReadOnly).
//
// # Shared reclaim
//
// Shared is the pass of a shard that ships to a bucket: adopt the bucket's
// watermark locally (a pass that crashed after its commit left the store
// behind) → plan (only segments durable in the bucket) → commit the
// watermark (watermark.Advance, compare-and-swap, monotonic) → reclaim
// locally → delete the bucket's segment objects ≤ the watermark's segment
// (each after its derived index object, docs/FORMAT.md §6.10; a sweep also
// lists the index objects and deletes those ≤ it) and tail objects whose
// last sequence ≤ its sequence. Cold loads skip
// everything ≤ the watermark, so a crash after any step leaves orphans no
// reader looks at, which the next pass deletes (deletes are idempotent; a
// failed delete is counted and retried next pass). A watermark the local
// store cannot match (beyond its segments, or ending a segment at another
// sequence) is refused with ErrDiverged and nothing changes.
//
// Shared reclaim is owner-only. The caller says so explicitly with Role:
// anything but Owner is refused with ErrNotOwner before any request (the
// zero Role is NonOwner, so forgetting to say refuses). The engine passes
// Owner only with the store of the shard it owns, opened writable; a store
// that cannot reclaim (a read-only view: localseg.ErrReadOnly) is refused
// before any request as well. A bucket
// without compare-and-swap (mem://, file://) is refused with
// ErrSharedUnsupported (errors.Is blobtier.ErrUnsupported): there the
// watermark could move backward.
//
// # Tail cleanup
//
// CleanupTail deletes the shard's tail objects whose last sequence is at or
// below the bound it is given: the committed rw.durable_seq (docs/FORMAT.md
// §6.5), which the shipper commits from the contiguous durable watermark
// (watermark.Contiguous: it stops at the first segment not yet durable,
// never a maximum over durable ones) before it cleans up.
// Keys it does not understand are kept and counted as unparsed; the result
// reports reclaimed, bytes (sized from the listing, before the delete),
// failed and retained.
//
// # Locks and concurrency
//
// Nothing in this package takes a store lock itself. Snapshot and Reclaim
// take the store's own lock briefly; the bucket requests of Shared,
// DeleteThrough and CleanupTail (compare-and-swap, list, delete) run with no
// lock that appends take. The functions keep no state between calls and are
// safe for concurrent use on different shards; two passes on the same shard
// at once are not supported (the engine runs one GC loop per owned shard).
// A plan is a snapshot: a consumer created between the plan and the reclaim
// starts at the new base.
package reclaim
