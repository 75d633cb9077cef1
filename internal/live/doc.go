// Package live is waiting on a shard's log: block until a commit puts a
// record beyond a cursor (long-poll), and follow the log as it grows (an
// iterator). It owns no goroutine and no state: every wait is the caller's
// own goroutine parked on the store's commit notification (a channel the
// store closes and replaces on each commit, localseg.Store.TipChanged),
// its context and, for a bounded wait, one timer. Nothing polls, and an
// appender's only cost is closing that channel.
//
// A wait ends on the first of: the answer holds a record (returned at
// once), the bound passes (the answer re-read then, empty or not), the
// context ends (its error, or its cause), or the store releases its
// waiters at shutdown (localseg.ErrClosed, which the caller maps to its
// own closed error). Safe for concurrent use: it only reads the store.
package live
