// Package kill9 is the process-crash harness of bucketlog: it runs the
// engine in a child process under a concurrent workload, kills it with
// SIGKILL at random moments, and checks after every kill that nothing the
// engine acknowledged was lost, duplicated or altered.
//
// # How it works
//
// The test binary re-executes itself as the child (TestMain runs RunChild
// when the environment variable ChildEnv is set). The child opens the
// engine with bucketlog.Open on a directory the parent chose (and, in the
// bucket scenarios, on an s3:// URL of a gofakes3 server that runs in the
// parent, so the bucket outlives the child), then runs many appending
// goroutines (single appends and AppendBatch), two consumers pulling and
// acking (one lagging, so GC is bounded by it), periodic GC, tail shipping
// and, in synchronous mode, appends that wait for the bucket.
//
// The child reports to the parent on file descriptor 3, one line per fact,
// and writes a line only after the call it reports returned success:
//
//	A seq run writer n      an append was acknowledged (durable)
//	N seq run writer n      synchronous mode: ErrNotInBucket (durable locally only)
//	c consumer seq          an ack is about to be issued (an upper bound)
//	C consumer cursor       an ack returned with this cursor
//	T S                     Log.ShippedThrough rose to S (the bucket holds 1..S)
//	O torn_bytes replayed   what Open found
//	R                       ready: opened, consumers exist, workload starting
//	B                       red-control burst finished
//	F message               an operation failed (never expected)
//	E message               the child cannot go on (never expected)
//
// An event's payload, execution id and transaction id are a deterministic
// function of (run, writer, n), so the parent checks every stored record
// byte for byte, acknowledged or not, and finds duplicates by identity.
// A report line is at most a few hundred bytes and goes out in one write(2)
// to a pipe, which is atomic; a line the kill cut short is discarded.
// Losing report lines is always safe: the parent then checks less.
//
// After each kill the parent opens the shard directory read-only and
// checks it (see Check): every acknowledged event at its sequence with its
// exact payload, no identity twice, sequences gapless from the base, each
// writer's events in order, consumer cursors not backward, not beyond what
// was acked and not beyond the tip, and nothing reclaimed that the lagging
// consumer had not acked. In the bucket scenarios a fixed plan (Scenario.
// Plan) then decides what happens to the directory: 'S' the next child
// restarts on it; 'R' the parent deletes it, restores it with
// bucketlog.Restore and checks the restored store against what the bucket
// promised — in asynchronous mode everything acknowledged at or below the
// last reported ShippedThrough (later events are the documented loss
// window and are counted apart), in synchronous mode everything
// acknowledged (ErrNotInBucket events excepted); 'H' the parent deletes
// it and the next child's Open hydrates it from the bucket, so kills also
// land mid-hydration (the next check holds older events to the restore
// promise and the hydrating child's own to the local one). The sequence
// continues across every restart; a restore that lost the window lets the
// next child reuse those sequences, and the model drops exactly the
// promises a check settled.
//
// Scenarios (see the tests): local, local with GC (the engine runs its
// periodic GC only with a bucket, so the child drives explicit Log.GC
// passes), bucket asynchronous, bucket synchronous, bucket synchronous on
// a slow bucket (PUTs held up to Scenario.PutDelay, so some appends
// answer ErrNotInBucket and more kills land with uploads in flight), and
// bucket with periodic GC and keep-last-N retention.
//
// Red controls show the checks see loss: a restore asked for every
// acknowledged event after a burst nothing shipped (the tick is an hour
// away) must count exactly that burst as lost; a segment cut in half
// after a kill must count the acknowledged events it held as lost.
//
// # Crash assumptions
//
// A SIGKILL stops the process; the kernel keeps every byte the process
// wrote to files (the page cache survives), so this harness tests the
// engine's ordering and recovery logic under process death, not power
// loss: an engine that acknowledged before fdatasync would pass it
// (localseg's crash sweep with its crashable in-memory filesystem covers
// lost unsynced writes). For the same reason torn tails are rare here: the
// store writes a group in one pwrite, which a kill cuts only between
// pages of a large write. Bucket requests that were in flight at the
// kill are drained before the parent looks at the bucket: each child talks
// to a listener of its own, which the parent shuts down (waiting for
// running handlers) after the child died.
//
// # Safety
//
// Everything listens on 127.0.0.1 only. A child is killed by the parent's
// deferred cleanup, by the kernel when the parent dies (Pdeathsig), and by
// its own watchdog after ChildLifetime. Nothing here is safe for
// concurrent use unless it says so; Run drives one scenario at a time.
package kill9
