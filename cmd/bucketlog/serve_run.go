package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
)

// serveOutput is the line serve prints once it listens.
type serveOutput struct {
	Action string `json:"action"`
	Listen string `json:"listen"`
}

const serveAbout = `
Serves the shard this process owns over HTTP. There is NO
AUTHENTICATION: anyone who reaches the address can append, read, and move or
delete consumers. Keep the default loopback address, or put serve behind a
proxy that authenticates.

Configuration: the environment (NOETL_EHDB_*, NOETL_SHARD_INDEX/COUNT,
BUCKETLOG_BUCKET_URL; bucketlog selfcheck config shows the result), then the
flags. A shard directory that was ever opened with a bucket requires it
(exit 2 without) and refuses another bucket or prefix (exit 2,
nothing written); to re-point it on purpose, stop it and remove its
bucket.json. The local_reference backend is refused (exit 2): serve runs
the durable segment store only.

Once listening it prints one line on stdout:
  {"action":"serve","listen":"HOST:PORT"}
(--listen with port 0 picks a free port; the line has the real one). The
shard is opened after that: until it has recovered (and, with a bucket,
reconciled with or hydrated from it) every /v1 request and /readyz answer
503, but /v1/status: 200, state "opening". If opening fails, a second line {"error","class"} follows and serve
exits with the class's code. An empty shard directory is hydrated from the
bucket: the log then ends where the bucket's copy ends, and in asynchronous
mode the sequences of the lost disk's last tick (acknowledged, never shipped)
are given to new events; a consumer that read them from the old disk sees
other events under those numbers.

Routes (JSON bodies; errors are {"error","class"} plus "owner_shard" for 421):
  POST   /v1/events                          one event {"execution_id","transaction_id","payload"}
                                             → 201 {"action":"eventlog-append",…}
         body {"events":[…]} (≤ 10000)       → 201 {"action":"eventlog-append-batch",…}
         validated whole first: 400 invalid, 421 not owned, 413 too large (event,
         body over --max-body-bytes, or more than 10000 events); nothing written.
         A retry (same transaction id, execution id and payload) → 200 with
         the original sequence and "duplicate":true; the id with other
         content → 409 naming the sequence that holds it (see below).
         With --sync-to-bucket, 202 with the outcome and "class":"not_in_bucket"
         when the bucket did not confirm in time: the event is durable locally
         and ships later; retry it with the same transaction id (it is not
         written again: 202 until the bucket holds it, then 200).
  GET    /v1/events?after=N&limit=N          200 the scan outcome ("exists":false when empty)
  GET    /v1/executions/{id}/events?after=&limit=
                                             200 the read outcome; 421 if another shard owns it
                                             (over HTTP a non-owner read is not cold-loaded)
  POST   /v1/consumers/{name}/pull?limit=N   200 the tail outcome; a pull that would create a
                                             consumer beyond --max-consumers → 409 naming the limit
  POST   /v1/consumers/{name}/ack            body {"sequence":N} → 200 the ack outcome
  DELETE /v1/consumers/{name}                204 (404 if unknown)
  GET    /v1/events/stream?after=N           Server-Sent Events (below)
  GET    /v1/executions/{id}/events/stream?after=N
  GET    /v1/consumers                       200 {"action":"eventlog-consumers","log_record_count","base",
                                             "consumers":[{"consumer","acked_sequence","pending_count",
                                             "holds_gc_back"}]} (see bucketlog consumers --help)
  GET    /v1/consumers/{name}                200 one consumer; 404 if unknown (not created)
  GET    /metrics                            Prometheus metrics (prefix bucketlog_)
  GET    /healthz                            200 while the process answers
  GET    /v1/status                          200 {"action":"status","shards":[…]}: per shard its
                                             state (ready, degraded: the bucket is failing but
                                             appends are taken, not_ready, stopped: a second
                                             writer or fenced), fenced, epoch, tip, base,
                                             watermark, shipped_through, unshipped and the age of
                                             the oldest, segments_local, segments_durable (in the
                                             bucket), segments_remote (only in the bucket),
                                             last shipment, last bucket error (redacted)
  GET    /readyz                             200 while the shard takes appends (open, not
                                             poisoned, not stopped, within --max-unshipped-age);
                                             a failing bucket alone leaves it 200 (see
                                             /v1/status); else 503 {"ready":false,"reason"}
limit defaults to 1000, at most 100000. A page also stops before its records
pass --max-page-bytes (default 8 MiB; it always holds one record, however
large): it then adds "truncated":true and "next_after":N, the last sequence
returned; continue with ?after=N (a pull: ack N, pull again). Request bodies
in flight across the server are bounded by --max-inflight-body-bytes
(default 64 MiB; a body without Content-Length counts its bytes as read):
a request beyond it is refused before its body is read (or midway), with 503,
"class":"storage" and Retry-After (nothing written; retry). Unknown fields
and query parameters are refused (400). Statuses: 400 usage/invalid_input, 404 unknown consumer,
409 invalid_state, 413 too large, 421 not_owner, 503 storage or not ready.
A batch is refused whole, but a crash in the middle of writing one may leave
an unacknowledged prefix.

` + retryNote + `

Waiting: the scan, the per-execution read and the pull take ?wait=D (a Go
duration, at most 5m; 0, the default, answers at once): with no record
beyond the cursor the request is held until an append commits one (then it
answers at once) or D passes (then the empty page); the header
Bucketlog-Wait says which (ready | timeout). A held request outlives the
server's read timeout; a client that goes away ends it; on shutdown it is
answered 503 "the server is shutting down" at once.
Streams: one event per record, "id: <sequence>" and "data: <the record as
in a scan>", after a first "event: start" {"after","base","clamped","tip"}
(what a scan from there says; a start below the reclaim base begins at the
base). A reconnect with the Last-Event-ID header resumes after it (it
overrides ?after=). A comment line ": heartbeat" comes every 15s. The
server ends a stream with "event: end" {"reason","resume_after"}: reason
shutdown, slow_consumer (the subscriber let 10000 records pile up
unread: appends never wait for a subscriber) or error. A connection that
takes nothing for 1m is closed. Under load the subscribers are written at
most once per 2ms, or per 100µs for each subscriber when longer (10ms with
100): one write for all the records committed meanwhile. The body is not
chunked: it ends with the connection.

With the bucket unreachable serve keeps appending (events are durable on the
local disk) and retrying: it logs a WARN at the first failure, then one WARN
per --bucket-warn-interval (default 1m) with the count while it lasts, and an INFO when the bucket recovers;
/v1/status and the metrics show it, /readyz stays 200. --max-unshipped-age D
makes /readyz 503 once the bucket has failed for longer than D and the oldest
unshipped event is older than D; with --refuse-when-unshipped appends are
then refused too (503, "class":"storage", nothing written), for operators who
prefer a bounded loss window over availability. Both are off by default. On SIGTERM, SIGINT or SIGHUP
it stops accepting, finishes requests in flight (--shutdown-timeout), ships
the tail one last time (--shutdown-ship-timeout) and exits 0 when the bucket
holds every event; when it does not, it logs at ERROR how many events remain
unshipped ("sequences A..B": durable on the local disk, they ship on the
next start with the bucket) and exits 7 (not_in_bucket). A fenced shard (a
newer owner claimed it) exits 8 (fenced), naming at ERROR the events that
never shipped: its next start moves the directory aside (quarantine).`

func runServe(c *cli, args []string) int {
	f := newFlags("serve", "[--listen HOST:PORT] [--dir PATH] [--shard-index N --shard-count N] [--bucket URL] [flags]", serveAbout)
	store := addStoreFlags(f)
	txnWindow, maxCons := addTxnWindowFlag(f), addMaxConsumersFlag(f)
	retention := addLocalRetentionFlags(f)
	route := addRouteFlags(f)
	bucket := addBucketFlag(f, "the bucket the shard ships to")
	listen := f.String("listen", defaultListen, "the `HOST:PORT` to listen on (port 0 picks a free port)")
	tailInterval := f.Duration("tail-interval", 0, "tail replication tick, the loss window of a lost disk (default NOETL_EHDB_TAIL_INTERVAL_SECS, else 15s)")
	sync := f.Bool("sync-to-bucket", false, "an append answers only once the bucket holds it (202 if it does not confirm within --sync-wait)")
	syncWait := f.Duration("sync-wait", 0, "how long --sync-to-bucket waits for the bucket (default 10s)")
	maxBody := f.Int64("max-body-bytes", defaultMaxBody, "cap on a request body in bytes")
	maxPage := f.Int64("max-page-bytes", defaultMaxPageBytes, "cap on the record bytes of one page (scan, read, pull); a page cut by it says \"truncated\":true")
	maxInflight := f.Int64("max-inflight-body-bytes", 0, "cap on the request body bytes in flight across the server; beyond it 503 with Retry-After (default 64 MiB, at least --max-body-bytes)")
	drain := f.Duration("shutdown-timeout", 10*time.Second, "on SIGTERM, how long requests in flight may take to finish")
	startup := f.Duration("startup-timeout", 0, fmt.Sprintf("how long opening retries a bucket that does not answer before it gives up (default %v)", bucketlog.DefaultStartupTimeout))
	shipTimeout := f.Duration("shutdown-ship-timeout", 0, "on SIGTERM, the bound on the last tail shipment (default 10s)")
	maxUnshipped, refuseUnshipped := addUnshippedFlags(f)
	warnEvery := addBucketWarnFlag(f)
	fence := addFencingFlags(f, false)
	if stop, code := c.parse(f, args); stop {
		return code
	}
	env := c.env()
	if !backendOf(env).durable() {
		return c.fail(usagef("serve runs the durable segment store only; NOETL_EHDB_EVENTLOG_BACKEND=local_reference is for parity tests and migration"))
	}
	opts, own, err := c.shardOptions(f, env, store, route, bucket, tailInterval)
	if err != nil {
		return c.fail(err)
	}
	txnWindow.apply(f, &opts)
	fence.apply(&opts)
	if err := maxCons.apply(f, &opts); err != nil {
		return c.fail(err)
	}
	if err := retention.apply(c, f, &opts); err != nil {
		return c.fail(err)
	}
	if *sync {
		if opts.BucketURL == "" {
			return c.fail(usagef("--sync-to-bucket needs a bucket (--bucket or BUCKETLOG_BUCKET_URL)"))
		}
		if opts.DisableTailReplication {
			return c.fail(usagef("--sync-to-bucket needs tail replication (NOETL_EHDB_TAIL_REPLICATION is off)"))
		}
		opts.SyncToBucket = true
	}
	if f.isSet("sync-wait") {
		if *syncWait <= 0 || !*sync {
			return c.fail(usagef("--sync-wait needs --sync-to-bucket and a positive duration"))
		}
		opts.SyncWait = *syncWait
	}
	if *maxBody <= 0 {
		return c.fail(usagef("--max-body-bytes %d must be positive", *maxBody))
	}
	if *maxPage <= 0 {
		return c.fail(usagef("--max-page-bytes %d must be positive", *maxPage))
	}
	if f.isSet("max-inflight-body-bytes") && *maxInflight < *maxBody {
		return c.fail(usagef("--max-inflight-body-bytes %d must be at least --max-body-bytes %d (a body of the largest size could never be taken)", *maxInflight, *maxBody))
	}
	if *drain <= 0 {
		return c.fail(usagef("--shutdown-timeout %v must be positive", *drain))
	}
	if f.isSet("startup-timeout") {
		if *startup <= 0 {
			return c.fail(usagef("--startup-timeout %v must be positive", *startup))
		}
		opts.StartupTimeout = *startup
	}
	if f.isSet("shutdown-ship-timeout") {
		if *shipTimeout <= 0 {
			return c.fail(usagef("--shutdown-ship-timeout %v must be positive", *shipTimeout))
		}
		opts.ShutdownShipTimeout = *shipTimeout
	}

	if err := unshippedOptions(f, &opts, *maxUnshipped, *refuseUnshipped); err != nil {
		return c.fail(err)
	}
	if err := bucketWarnOptions(f, &opts, *warnEvery); err != nil {
		return c.fail(err)
	}

	// A server logs what it does (reclaims, shipping failures) at info; the
	// one-shot commands keep stderr to warnings.
	logger := c.logger(slog.LevelInfo)
	opts.Logger = logger
	stopProfile, err := c.startCPUProfile()
	if err != nil {
		return c.fail(err)
	}
	defer stopProfile()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	opts.Registerer = reg

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return c.fail(usagef("--listen %s: %v", *listen, err))
	}
	a := newAPI(apiConfig{own: own, segMax: segMax(opts), maxBody: *maxBody, maxPage: *maxPage, maxInflight: *maxInflight, gatherer: reg})
	if err := instrumentAPI(a, reg, own.Index); err != nil {
		_ = ln.Close()
		return c.fail(err)
	}
	srv := &http.Server{
		Handler:           a,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(a.stopLive) // waits and streams end at once
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), *drain)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("requests still in flight at the shutdown bound; closing their connections", "err", err)
			_ = srv.Close()
		}
	}
	if code := c.emit(serveOutput{Action: "serve", Listen: ln.Addr().String()}); code != 0 {
		shutdown()
		return code
	}

	l, err := bucketlog.Open(c.ctx, opts)
	if err != nil {
		shutdown()
		if c.ctx.Err() != nil {
			logger.Warn("stopped by a signal before the shard was open", "err", oneLine(err.Error()))
			return 0
		}
		return c.fail(err)
	}
	a.setLog(l)
	if ok, reason := l.Ready(); ok {
		logger.Info("serving", "listen", ln.Addr().String(), "shard", own.Index, "shard_count", own.Count, "dir", l.Dir(), "bucket", blobtier.Redact(opts.BucketURL))
	} else {
		logger.Warn("serving, not ready", "listen", ln.Addr().String(), "shard", own.Index, "reason", reason)
	}

	code := 0
	select {
	case <-c.ctx.Done():
		if opts.BucketURL != "" {
			logger.Info("stopping: no new requests; then the tail ships one last time")
		} else {
			logger.Info("stopping: no new requests")
		}
	case err := <-served:
		// The listener failed under us: stop like a SIGTERM, but say so.
		logger.Error("the HTTP server stopped", "err", err)
		code = exitCode(bucketlog.ClassStorage)
	}
	shutdown()
	// No request is in flight any more: the tip is final.
	tip := l.Store().Tip()
	fenced := l.Status().Fenced
	closeErr := l.Close()
	if fenced {
		if cc := fencedCloseCode(logger, own.Index, tip, l.ShippedThrough()); code == 0 {
			code = cc
		}
	} else if cc := closeCode(logger, opts.BucketURL != "", tip, l.ShippedThrough(), closeErr); code == 0 {
		code = cc
	}
	return code
}

// closeCode reports how the shard closed and returns the exit code it
// earns: 7 (not_in_bucket) when a bucket is configured and it does not hold
// every event through tip — they are durable on the local disk and ship on
// the next start with the bucket —, else 0 (a close error that lost nothing
// is logged, not an exit code).
func closeCode(logger *slog.Logger, bucket bool, tip, shipped uint64, err error) int {
	if bucket && shipped < tip {
		attrs := []any{"unshipped", tip - shipped, "sequences", fmt.Sprintf("%d..%d", shipped+1, tip)}
		if err != nil {
			attrs = append(attrs, "err", oneLine(err.Error()))
		}
		logger.Error(fmt.Sprintf("stopped with %d events not in the bucket, sequences %d..%d: durable on the local disk, they ship on the next start with the bucket", tip-shipped, shipped+1, tip), attrs...)
		return exitCode(bucketlog.ClassNotInBucket)
	}
	if err != nil {
		logger.Error("closing the shard", "err", oneLine(err.Error()))
		return 0
	}
	logger.Info("stopped")
	return 0
}

// fencedCloseCode reports the close of a fenced shard and returns 8
// (fenced): nothing it holds beyond the shipped end ships any more; the
// next start moves the directory aside (quarantine).
func fencedCloseCode(logger *slog.Logger, shard int, tip, shipped uint64) int {
	if shipped < tip {
		logger.Error(fmt.Sprintf("stopped fenced with %d events not in the bucket, sequences %d..%d: they never ship; the next start moves the directory aside (quarantine list, then quarantine reappend --shard %d re-appends them through the current owner)", tip-shipped, shipped+1, tip, shard),
			"unshipped", tip-shipped, "sequences", fmt.Sprintf("%d..%d", shipped+1, tip))
	} else {
		logger.Error("stopped fenced: a newer owner holds the shard")
	}
	return exitCode(bucketlog.ClassFenced)
}
