// Package localref is the seeds' incumbent "local_reference" event-log
// driver: the whole log is one JSONL file, one JSON object a line, one line
// per record — events, consumer creations, acks and consumer deletions:
//
//	{"kind":"event","global_sequence":1,"execution_id":"100","transaction_id":"t","payload":"…"}
//	{"kind":"consumer_create","consumer":"projector"}
//	{"kind":"ack","consumer":"projector","sequence":1}
//	{"kind":"consumer_delete","consumer":"projector"}
//
// It is NOT production durable and must never be the authoritative store:
// there is no checksum on a line (a flipped byte inside a string is read back
// as different data), the whole log and its index live in memory, the file is
// never segmented, shipped or reclaimed, and it lives on whatever disk the
// process has. It exists for the parity tests that prove the durable segment
// store (localseg) keeps the incumbent's semantics, and for migration.
//
// # Contract
//
// *Driver has the same method set and result types as *localseg.Store for
// Append, AppendBatch, Scan, ReadExecution, Pull, Ack, DeleteConsumer and
// Close, and uses localseg's types and error sentinels, so both satisfy one
// interface and return the same values and error classes for the same
// operations: sequences gapless from 1, created_stream for the first event,
// record_count counting everything in scope after the cursor, base 1 (this
// driver never reclaims), a consumer created on its first pull of a non-empty
// log (a pull of an empty log writes nothing), acks at or below the cursor
// are no-ops, ack 0 or beyond the tip is an invalid-state error, identifiers
// trimmed and checked as in docs/FORMAT.md §2.6, and an event whose durable frame would
// exceed the segment size refused as too large.
//
// # Crash assumptions
//
// Each mutation writes whole lines at the end of the file and fdatasyncs
// before it returns. A crash can leave a last line without its newline; Open
// drops it (it was never acknowledged) and truncates the file. A whole line
// that does not decode is corruption and is reported, never skipped. A write
// or fsync error poisons the driver until it is reopened. A second Open of
// the same file fails while the first holds the lock file <path>.lock.
//
// # Concurrency
//
// A Driver is safe for concurrent use; one mutex serialises every
// operation, including the fsync.
//
// # Backend selection
//
// ParseBackend resolves NOETL_EHDB_EVENTLOG_BACKEND fail-safe: the value is
// trimmed of surrounding whitespace and compared exactly; only
// "local_reference" selects this driver; unset, empty or unknown values keep
// "durable_segment" and return a warning to log.
package localref
