// Package live is waiting on a shard's log: block until a commit puts a
// record beyond a cursor (long-poll), follow the log as it grows (an
// iterator), and fan commits out to live subscribers (Hub).
//
// Wait, Until and Follow own no goroutine and no state: every wait is the
// caller's own goroutine parked on the store's commit notification (a
// channel the store closes and replaces on each commit,
// localseg.Store.TipChanged), its context and, for a bounded wait, one
// timer. Nothing polls, and an appender's only cost is closing that
// channel. A wait ends on the first of: the answer holds a record
// (returned at once), the bound passes (the last read is returned: the
// empty page), the context ends (its error, or its cause), or the store
// releases its waiters at shutdown (localseg.ErrClosed, or the caller's
// own closed error through Closing).
//
// Hub runs one goroutine while it has subscribers (it ends when the last
// leaves, or when the store releases its waiters): it reads each commit's
// records once, encodes each once into a tail shared by every whole-log
// subscriber (each reads it through its own cursor; an execution's
// subscriber gets its records copied to its own buffer), and wakes each
// subscriber at most once per gap (MinGap, or GapPerSub per subscriber,
// up to MaxGap: the latency a busy stream adds, and sooner once half a
// subscriber's bound is waiting, so coalescing never ends a subscriber
// that keeps up) without waiting for any.
// A publication holds at most half a subscriber's bound (records and
// bytes); a hub that fell further behind publishes the rest at once, in
// more publications, so no single one ends a subscriber that keeps up.
// A publication's frames lie in one block, so a whole-log subscriber
// writes what it took as one run per publication (Runs), the same memory
// for every subscriber; a subscriber more than its bound behind is
// ended with ErrOverflow, holding exactly the bound. Subscribers catch up
// on history by reading the store themselves and join once they reach
// the hub's position.
//
// Everything here is safe for concurrent use; it only reads the store.
package live
