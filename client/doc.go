// Package client is a Go client of bucketlog's HTTP API (`bucketlog serve`,
// cmd/bucketlog/serve.go): typed requests and results for every route,
// context on every call, transient failures retried with backoff, and
// errors that errors.Is the engine's classes (bucketlog.ErrInvalidState,
// ErrInvalidInput, ErrUsage, ErrNotOwner, ErrNotInBucket, ErrUnknownConsumer,
// ErrTooLarge) plus this package's ErrStorage (the storage class, which the
// engine gives no sentinel) and ErrUnavailable (no usable answer).
//
// # Retries
//
// An attempt is retried, with exponential backoff and full jitter
// (Retry), when it got no answer (a connection refused or reset, a
// response lost, the per-attempt timeout Options.AttemptTimeout), a 502,
// 503 or 504, or — appends only — a 202 "not_in_bucket" from a synchronous
// server (the event is durable on the server's disk; the retry answers 202
// until the bucket holds it, then 200 "duplicate"). Every other status is
// final. An append is retried with the SAME transaction id: the client
// fills an empty Event.TransactionID once per call, before the first
// attempt, and returns it in the result (also on error), so the server's
// transaction window answers a retry instead of writing it twice; a caller
// that retries an Append call of its own must pass that id back in. A
// Retry-After header raises the next delay (capped at Retry.MaxDelay).
// Reads, pulls and acks are idempotent and retried the same way; a
// DeleteConsumer answered 404 after an attempt that got no answer counts as
// done (the lost attempt deleted it).
//
// # Errors
//
// A refusal is an *Error carrying the status, the class token and the
// server's message; errors.Is maps it onto the engine's sentinels by class
// (and by status: 404 ErrUnknownConsumer, 413 ErrTooLarge). A 421 carries
// the owner shard (Error.OwnerShard, OwnerShard(err)) and the answering
// replica's shard (Error.Shard, from the body's "shard"; -1 from a server
// that does not send it), and also unwraps to an *affinity.NotOwnerError
// naming both, so bucketlog.OwnerShard(err) works on it. When
// retries run out the last failure is returned, wrapped with the number of
// attempts.
//
// # Live reads
//
// Scan, ReadExecution and Pull take a Wait (the server's ?wait=D long poll;
// omitted when zero, so a server without it is unaffected); Follow is an
// iterator over the log built on it. Stream is an iterator over the
// Server-Sent Events of GET /v1/events/stream (id: the sequence, data: the
// record as in a scan) that reconnects after a dropped connection with
// Last-Event-ID, so it yields every record once and in order. These follow
// the text for the server's live routes (?wait=, the SSE stream
// and its per-execution form GET /v1/executions/{id}/events/stream); they
// are tested against a real serve process (live_serve_test.go: a wait
// answered by an append, a stream resumed by Last-Event-ID across a
// restart, a 421) and against a stand-in that drops connections.
//
// # Crash assumptions
//
// The client keeps nothing durable: a generated transaction id lives only
// as long as the call (and its result). A producer that must not duplicate
// across its own restarts passes its own id, derived from its durable
// state (an order id and step, an outbox row). The server remembers ids
// within its --transaction-window (README, Retries are safe): a retry
// later than that, or of an event GC reclaimed, is written again.
//
// A Client is safe for concurrent use; it holds no state besides its
// options and the *http.Client's connections. It imports the engine's root
// package only for the error sentinels.
package client
