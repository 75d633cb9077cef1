// Package fencing holds the objects and the one rule of writer fencing
// (docs/FORMAT.md, "Writer fencing"): the epoch claim, the start record
// (the cut that closes the predecessor epoch), and the lineage rule every
// reader of a shard's bucket state applies — cold load, restore, verify,
// a non-owner read — so that a stale writer (a zombie) can no longer make
// the bucket's history disagree with what the current owner acknowledged.
//
// It is a leaf: it imports nothing of ours. It does no I/O; the callers
// list the `ep.`/`eps.` keys (blobtier.KindClaim, blobtier.KindStart),
// read the records, and hand them to Chain. Decoding is strict about
// what the protocol needs (a record whose numbers contradict each other is
// ErrBadRecord, never guessed at) and tolerant of fields it does not know
// (a newer writer may add some).
//
// Crash assumptions: claims and start records are write-once and never
// deleted; a reader that finds a start record missing from the middle of
// the chain (ErrBrokenChain) refuses rather than guess which history is
// the acknowledged one.
//
// Everything here is a value or a pure function: safe for concurrent use.
package fencing
