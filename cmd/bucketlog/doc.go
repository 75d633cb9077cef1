// Command bucketlog is the operator's tool for the bucketlog event log: one
// engine (the root package) behind every command, one JSON object on stdout,
// everything else on stderr, and the exit codes listed under Errors.
//
// # Commands
//
// Log commands work on one shard directory, DIR/shard-NNNN (--dir, alias
// --root, default ./bucketlog-data):
//
//	append           {"action":"eventlog-append","execution_id","global_sequence","byte_len","created_stream","log_record_count"}
//	append --file F  {"action":"eventlog-append-batch","appended","first_sequence","last_sequence"}
//	scan             {"action":"eventlog-scan","exists","base","clamped","record_count","returned","records":[…]}
//	read             the scan fields with "action":"eventlog-read-exec","execution_id", plus "shard","served_by"
//	tail             {"action":"eventlog-tail","consumer","exists","created_consumer","acked_sequence","pending_count","returned","records"}
//	ack              {"action":"eventlog-ack","consumer","acked_sequence"}
//	consumer-delete  {"action":"eventlog-consumer-delete","consumer","deleted":true}
//	inspect          a report (segments, checkpoint, manifest, torn tail, problems); exit 5 when it finds corruption
//
// A record is {"global_sequence","execution_id","transaction_id","byte_len",
// "payload"}; byte_len is the payload's length in bytes. Bucket commands:
// ship, restore, verify and gc print a report object with "action" set to
// the command's name; each command's --help lists the report's fields. The
// drives (durable-eventlog-*) print the seeds' reports and exit 0 only when
// the report holds. serve, demo and selfcheck live in their own files.
//
// # Errors
//
// A failure prints one line on stderr and, on stdout, an object with
// "error" and "class" (and "owner_shard" for not_owner). When the command
// has something to show — a drive's report, verify's problems, the append
// outcome of exit 7 — those fields come first and "error" and "class" are
// appended. Exit codes: 0 ok, 1 invariant, 2 usage, 3 invalid_state,
// 4 invalid_input, 5 storage, 6 not_owner, 7 not_in_bucket, 8 fenced (a
// newer owner claimed the shard: every write is refused, HTTP 409). --help on any
// command, "bucketlog help" and "bucketlog help COMMAND" print usage on
// stdout and exit 0.
//
// Refused input writes nothing. Everything the command can check without the
// store — flags, identifiers, UTF-8 (raw bytes first: a JSON line's lone
// surrogate escape such as \ud800, which encoding/json would silently turn
// into U+FFFD, is refused), the event size against the segment cap, the
// shard pair, ownership — is checked before any store is opened, because a
// writable open creates the shard directory, its lock and its first segment
// even when the store then refuses the event. Reads (scan, read, inspect)
// open the store read-only: no lock, nothing written. tail, ack and
// consumer-delete of a shard that holds no store answer without creating it.
//
// # Configuration
//
// The environment (README.md, Configuration) is read first (ConfigFromEnv); flags
// override it. Ignored values are logged on stderr as warnings. The routing
// commands (append, the affinity drives, serve) take --shard-index and
// --shard-count together, else NOETL_SHARD_INDEX/NOETL_SHARD_COUNT, else 0
// of 1; a partial or invalid pair is a usage error, never shard 0. The
// one-shard commands take --shard N, else the environment's shard index
// (when its pair is valid), else 0. --bucket defaults to BUCKETLOG_BUCKET_URL.
//
// NOETL_EHDB_EVENTLOG_BACKEND=local_reference (the exact token, trimmed)
// routes append, scan, read, tail, ack and consumer-delete to the seeds'
// JSONL driver (internal/localref) in DIR/shard-NNNN/eventlog.jsonl, with its
// lock in eventlog.jsonl.lock. It is not production durable and never ships:
// bucket flags are refused with it. Any other value keeps the durable segment
// store.
//
// BUCKETLOG_DEBUG_CPUPROFILE=FILE makes serve write a CPU profile of its run
// to FILE, completed at an orderly stop (serve_pprof.go): a debugging aid for
// bench/cmd/serveprof, not a setting, so README.md does not list it.
//
// # Buckets and one-shot processes
//
// The one-shot writers open the engine with NoBackground, so no goroutine
// runs while they work; with a bucket, Close ships the tail once before the
// process exits (a failure there is a warning: the events are durable
// locally and the next open with the bucket ships them). append
// --sync-to-bucket is the exception: it needs the engine's tail ticker, so
// the engine's background work runs for the life of that command. If the
// bucket does not confirm within --sync-wait (default 10 s), the event is
// still durable locally with its sequence, the command exits 7 printing the
// append outcome; a retry with the same transaction id is safe (the
// transaction window answers it with the same sequence, see dedup.go).
//
// read of a shard the directory does not hold cold-loads it from the bucket
// into a temporary directory (removed afterwards) with coldload.ReadOnly, as
// the engine's non-owner read does: the engine offers that read only to a
// writable owner of another shard, which a read-only command must not be.
//
// # Operating decisions
//
// serve stops the orderly way on SIGTERM, SIGINT and SIGHUP alike, and its
// exit code says whether the bucket holds every event: 7 (not_in_bucket)
// with an ERROR line naming the unshipped "sequences A..B" when it does not.
// Every command takes --log-level and --log-format; `version` and
// `--version` print the build. A tick that would spin a core is refused,
// not raised: --tail-interval below 10ms and a positive --seal-max-age below
// 1s are usage errors, and so is a --bucket-warn-interval below 1s (the
// WARN summary of a failing bucket would be a line per request again). A read of a --dir that does not exist is a usage
// error (a mistyped path must not look like an empty log); an existing
// root without the shard is an empty shard. Event JSON is decoded strictly:
// a key given twice or spelt in another case is invalid input. Every list
// of every JSON output is [] when empty, never null. base means the first
// retained sequence everywhere (restore and verify also report the
// watermark, base - 1). verify without a shard list checks every shard the
// bucket holds (found by listing it), and a shard asked for that holds
// nothing is a problem. Bucket URLs are printed and stored only through
// blobtier.Redact.
//
// # Concurrency and crash assumptions
//
// Commands that write (append, tail, ack, consumer-delete, ship, gc,
// restore) take the shard's writer lock and fail at once (exit 3) while a
// server or another command holds it; reads take no lock and are safe next
// to a running server. Every write is fsync'd by the store before the
// command prints its outcome, so a printed outcome survives a crash of the
// machine; a command killed before it prints may or may not have written
// (a batch may leave a prefix: the store does not acknowledge it).
//
// # Adding a command
//
// A file of this package registers its commands from init:
//
//	func init() { register(command{name: "serve", group: groupServer, summary: "…", run: runServe}) }
//
// run receives a *cli (streams, environment, context, a stderr logger) and
// the arguments after the command's name, and returns the exit code. The
// helpers newFlags/parse (with --help), the flag groups (addStoreFlags,
// addRouteFlags, addShardFlag, addPageFlags, addBucketFlag), env/options,
// emit, fail and failWith give every command the same conventions.
package main
