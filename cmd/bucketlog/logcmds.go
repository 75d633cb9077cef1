package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
)

// Actions of the outputs (doc.go, Commands).
const (
	actionAppend         = "eventlog-append"
	actionAppendBatch    = "eventlog-append-batch"
	actionScan           = "eventlog-scan"
	actionRead           = "eventlog-read-exec"
	actionTail           = "eventlog-tail"
	actionAck            = "eventlog-ack"
	actionConsumerDelete = "eventlog-consumer-delete"
)

// localrefFile is the local_reference driver's JSONL file in a shard
// directory (its lock is localrefFile + ".lock").
const localrefFile = "eventlog.jsonl"

func init() {
	register(command{name: "append", group: groupLog, run: runAppend,
		summary: "append one event (or a file of events) to the shard this process owns"})
	register(command{name: "scan", group: groupLog, run: runScan,
		summary: "page through one shard's log"})
	register(command{name: "read", group: groupLog, run: runRead,
		summary: "page through one execution's events in one shard (locally, or from --bucket)"})
	register(command{name: "tail", group: groupLog, run: runTail,
		summary: "pull a durable consumer's pending events (creating it on its first pull)"})
	register(command{name: "ack", group: groupLog, run: runAck,
		summary: "move a durable consumer's cursor forward"})
	register(command{name: "consumer-delete", group: groupLog, run: runConsumerDelete,
		summary: "delete a durable consumer (it stops holding GC back)"})
}

// record is one event in an output.
type record struct {
	GlobalSequence uint64 `json:"global_sequence"`
	ExecutionID    string `json:"execution_id"`
	TransactionID  string `json:"transaction_id"`
	ByteLen        int    `json:"byte_len"`
	Payload        string `json:"payload"`
}

// records converts stored records; the result is never nil, so it prints
// as [] rather than null.
func records(rs []localseg.Record) []record {
	out := make([]record, 0, len(rs))
	for _, r := range rs {
		out = append(out, record{GlobalSequence: r.Seq, ExecutionID: r.ExecutionID, TransactionID: r.TransactionID, ByteLen: len(r.Payload), Payload: r.Payload})
	}
	return out
}

type appendOutput struct {
	Action         string `json:"action"`
	ExecutionID    string `json:"execution_id"`
	GlobalSequence uint64 `json:"global_sequence"`
	ByteLen        int    `json:"byte_len"`
	CreatedStream  bool   `json:"created_stream"`
	LogRecordCount uint64 `json:"log_record_count"`
	Duplicate      bool   `json:"duplicate,omitempty"` // a retry: nothing written, the original's sequence
}

type batchOutput struct {
	Action        string               `json:"action"`
	Appended      int                  `json:"appended"`
	FirstSequence uint64               `json:"first_sequence"`
	LastSequence  uint64               `json:"last_sequence"`
	Duplicates    []localseg.Duplicate `json:"duplicates,omitempty"`
	DurablePrefix int                  `json:"durable_prefix,omitempty"` // on an error: events[:DurablePrefix] are durable (batchAnswer)
}

type scanOutput struct {
	Action      string   `json:"action"`
	Exists      bool     `json:"exists"`
	Base        uint64   `json:"base"`
	Clamped     bool     `json:"clamped"`
	RecordCount uint64   `json:"record_count"`
	Returned    int      `json:"returned"`
	Records     []record `json:"records"`
}

func scanOf(p localseg.Page) scanOutput {
	return scanOutput{Action: actionScan, Exists: p.Exists, Base: max(p.Base, 1), Clamped: p.Clamped,
		RecordCount: p.RecordCount, Returned: len(p.Records), Records: records(p.Records)}
}

type readOutput struct {
	Action      string   `json:"action"`
	ExecutionID string   `json:"execution_id"`
	Exists      bool     `json:"exists"`
	Base        uint64   `json:"base"`
	Clamped     bool     `json:"clamped"`
	RecordCount uint64   `json:"record_count"`
	Returned    int      `json:"returned"`
	Records     []record `json:"records"`
	// Shard and ServedBy say where the page came from: owner_resident (the
	// local shard directory) or non_owner_cold_load (the bucket).
	Shard    int    `json:"shard"`
	ServedBy string `json:"served_by"`
}

func readOf(id string, shard int, servedBy string, p localseg.Page) readOutput {
	return readOutput{Action: actionRead, ExecutionID: id, Exists: p.Exists, Base: max(p.Base, 1), Clamped: p.Clamped,
		RecordCount: p.RecordCount, Returned: len(p.Records), Records: records(p.Records), Shard: shard, ServedBy: servedBy}
}

type tailOutput struct {
	Action          string   `json:"action"`
	Consumer        string   `json:"consumer"`
	Exists          bool     `json:"exists"`
	CreatedConsumer bool     `json:"created_consumer"`
	AckedSequence   uint64   `json:"acked_sequence"`
	PendingCount    uint64   `json:"pending_count"`
	Returned        int      `json:"returned"`
	Records         []record `json:"records"`
}

func tailOf(consumer string, r localseg.PullResult) tailOutput {
	return tailOutput{Action: actionTail, Consumer: consumer, Exists: r.Exists, CreatedConsumer: r.Created,
		AckedSequence: r.Acked, PendingCount: r.Pending, Returned: len(r.Records), Records: records(r.Records)}
}

type ackOutput struct {
	Action        string `json:"action"`
	Consumer      string `json:"consumer"`
	AckedSequence uint64 `json:"acked_sequence"`
}

type deleteOutput struct {
	Action   string `json:"action"`
	Consumer string `json:"consumer"`
	Deleted  bool   `json:"deleted"`
}

// holdsStore reports whether a shard directory holds a segment store (a
// segment file or a reclaim manifest).
func holdsStore(dir string) (bool, error) { return localseg.IsStore(dir) }

// closeLog closes a one-shot engine. Its error cannot undo what the
// command already did (an append is durable before Close), so it is a
// warning: with a bucket it is usually the last shipment, which the next
// open with the bucket retries.
func (c *cli) closeLog(l shardLog) {
	if err := l.Close(); err != nil {
		c.log.Warn("closing the shard", "err", oneLine(err.Error()))
	}
}

const appendAbout = `
Appends to the shard this process owns (--shard-index of --shard-count, or
NOETL_SHARD_INDEX/NOETL_SHARD_COUNT; both unset: shard 0 of 1). The event is
durable on the local disk (fdatasync) before the command prints.

One event: --execution-id, --transaction-id and --payload (all required; the
payload may be empty). Output:
  {"action":"eventlog-append","execution_id","global_sequence","byte_len",
   "created_stream","log_record_count"}
byte_len is the payload's length in bytes; created_stream is true for the
shard's first event; log_record_count is the tip (the highest sequence).

A batch: --file F, one JSON event {"execution_id","transaction_id","payload"}
a line (blank lines skipped; unknown fields, missing fields, trailing data,
invalid UTF-8 and lone surrogate escapes such as \ud800 are refused). Every
event is validated — identifiers, UTF-8, size, ownership — before any is
written, and the batch is appended as one group. An empty file is invalid
input (exit 4). Output:
  {"action":"eventlog-append-batch","appended","first_sequence","last_sequence"}
A crash in the middle of writing a batch may leave an unacknowledged prefix.

An execution another shard owns is refused with nothing written (exit 6,
"owner_shard" names the owner).

` + retryNote + `

With a bucket (--bucket or BUCKETLOG_BUCKET_URL) the command ships the tail
before it exits (a failure to ship is a warning: the event is durable
locally and the next run with the bucket ships it). With --sync-to-bucket it
waits (--sync-wait, default 10s) until the bucket holds the event; if the
bucket does not confirm in time the event is still durable locally and keeps
its sequence: the command prints the append outcome with
"class":"not_in_bucket" and exits 7. Retry it with the same transaction id:
it is not written again (exit 7 until the bucket holds it, then exit 0 with
"duplicate":true).

Under NOETL_EHDB_EVENTLOG_BACKEND=local_reference the event goes to the JSONL
driver (DIR/shard-NNNN/eventlog.jsonl, not production durable; no bucket).`

func runAppend(c *cli, args []string) int {
	f := newFlags("append", "[--dir PATH] [--shard-index N --shard-count N] (--execution-id ID --transaction-id ID --payload TEXT | --file F) [--bucket URL [--sync-to-bucket]]", appendAbout)
	store := addStoreFlags(f)
	txnWindow := addTxnWindowFlag(f)
	route := addRouteFlags(f)
	execID := f.String("execution-id", "", "the execution `ID` ([A-Za-z0-9_-], 1-256 bytes after trimming)")
	txnID := f.String("transaction-id", "", "the transaction `ID` (non-blank)")
	payload := f.String("payload", "", "the payload `TEXT` (valid UTF-8; stored byte for byte)")
	file := f.String("file", "", "append the events of file `F` (- for stdin), one JSON event a line, validated whole first")
	bucket := addBucketFlag(f, "the bucket the shard ships to")
	sync := f.Bool("sync-to-bucket", false, "return only once the bucket holds the event (exit 7 if it does not confirm within --sync-wait)")
	syncWait := f.Duration("sync-wait", 0, "how long --sync-to-bucket waits for the bucket (default 10s); the last shipment at exit gets as long again")
	tailInterval := f.Duration("tail-interval", 0, "tail replication tick while the command runs (default NOETL_EHDB_TAIL_INTERVAL_SECS, else 15s)")
	if stop, code := c.parse(f, args); stop {
		return code
	}
	env := c.env()
	opts, own, err := c.shardOptions(f, env, store, route, bucket, tailInterval)
	if err != nil {
		return c.fail(err)
	}
	txnWindow.apply(f, &opts)
	if f.isSet("sync-wait") {
		if *syncWait <= 0 {
			return c.fail(usagef("--sync-wait %v must be positive", *syncWait))
		}
		if !*sync {
			return c.fail(usagef("--sync-wait needs --sync-to-bucket"))
		}
		opts.SyncWait = *syncWait
	}

	// The input, validated in full before anything is opened.
	batch := f.isSet("file")
	var evs []localseg.Event
	var lines []int
	if batch {
		for _, n := range []string{"execution-id", "transaction-id", "payload"} {
			if f.isSet(n) {
				return c.fail(usagef("--file and --%s exclude each other", n))
			}
		}
		var in io.Reader = c.stdin
		if *file != "-" {
			fh, err := os.Open(*file)
			if err != nil {
				return c.fail(usagef("--file: %v", err))
			}
			defer fh.Close()
			in = fh
		}
		evs, lines, err = readEvents(in, segMax(opts))
		if err != nil {
			return c.fail(fmt.Errorf("--file %s: %w", *file, err))
		}
	} else {
		if err := requireFlags(f, "execution-id", "transaction-id", "payload"); err != nil {
			return c.fail(err)
		}
		ev, err := checkEvent(localseg.Event{ExecutionID: *execID, TransactionID: *txnID, Payload: *payload}, segMax(opts))
		if err != nil {
			return c.fail(err)
		}
		evs, lines = []localseg.Event{ev}, []int{0}
	}
	for i, ev := range evs {
		if err := checkOwned(own, ev); err != nil {
			if batch {
				err = fmt.Errorf("--file %s: line %d: %w", *file, lines[i], err)
			}
			return c.fail(err)
		}
	}

	b := backendOf(env)
	if err := b.refuseFlags(c, f, env, "bucket", "sync-to-bucket"); err != nil {
		return c.fail(err)
	}
	if *sync {
		if opts.BucketURL == "" {
			return c.fail(usagef("--sync-to-bucket needs a bucket (--bucket or BUCKETLOG_BUCKET_URL)"))
		}
		// Synchronous mode needs the engine's tail ticker, so the
		// background work runs for the life of the command.
		opts.SyncToBucket = true
		opts.ShutdownShipTimeout = opts.SyncWait
	} else {
		opts.NoBackground = true
	}
	l, err := b.open(c, opts, own.Index, openAppend)
	if err != nil {
		return c.fail(err)
	}
	if batch {
		res, err := l.AppendBatch(c.ctx, evs)
		c.closeLog(l)
		out, report, err := batchAnswer(len(evs), res, err)
		if err != nil {
			return c.failWith(report, err)
		}
		return c.emit(out)
	}
	res, err := l.Append(c.ctx, evs[0])
	c.closeLog(l)
	out := appendOutput{Action: actionAppend, ExecutionID: evs[0].ExecutionID, GlobalSequence: res.Seq,
		ByteLen: len(evs[0].Payload), CreatedStream: res.Created, LogRecordCount: res.Tip, Duplicate: res.Duplicate}
	switch {
	case errors.Is(err, bucketlog.ErrNotInBucket):
		return c.failWith(out, notInBucket(err, res.Seq, res.Seq))
	case err != nil:
		return c.fail(err)
	}
	return c.emit(out)
}

// notInBucket explains exit 7.
func notInBucket(err error, first, last uint64) error {
	seqs := fmt.Sprintf("sequence %d", first)
	if last != first {
		seqs = fmt.Sprintf("sequences %d-%d", first, last)
	}
	return fmt.Errorf("%w; %s stay durable locally and ship later: a retry with the same transaction id is safe (it is not written again)", err, seqs)
}

// oneShard is the common set-up of the one-shard commands: store flags,
// --shard, the environment.
type oneShard struct {
	f     *flagSet
	store *storeFlags
	shard *shardFlag
}

func newOneShard(name, synopsis, about string) *oneShard {
	f := newFlags(name, synopsis, about)
	return &oneShard{f: f, store: addStoreFlags(f), shard: addShardFlag(f)}
}

// resolve returns the options for shard n of the store the flags name.
func (s *oneShard) resolve(c *cli) (envConfig, bucketlog.Options, int, error) {
	env := c.env()
	opts := c.options(env)
	if err := s.store.apply(s.f, &opts); err != nil {
		return env, opts, 0, err
	}
	n, err := s.shard.shard(s.f, env)
	if err != nil {
		return env, opts, 0, err
	}
	// One shard of a pool at least n+1 wide: the command works on shard n
	// only, so the pool's real width does not matter to it.
	opts.ShardIndex, opts.ShardCount = n, max(n+1, opts.ShardCount)
	return env, opts, n, nil
}

// existingRoot refuses a read of a store root that does not exist: a
// mistyped --dir must not look like an empty log (usage, exit 2). A root
// that exists without the shard's directory is an empty shard
// ("exists":false, exit 0).
func existingRoot(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usagef("--dir %s does not exist (a read never creates it; check the path)", dir)
	case err != nil:
		return fmt.Errorf("%w: --dir %s: %v", localseg.ErrInvalidState, dir, err)
	case !fi.IsDir():
		return usagef("--dir %s is not a directory", dir)
	}
	return nil
}

const scanAbout = `
Reads one shard directory read-only (no lock, nothing written; it works while
a server owns the shard). Output:
  {"action":"eventlog-scan","exists","base","clamped","record_count","returned",
   "records":[{"global_sequence","execution_id","transaction_id","byte_len","payload"}]}
exists is false for a shard that holds no event (not an error); base is the
first retained sequence; clamped is true when --after was below it;
record_count counts every record after the cursor, returned those printed.
Under NOETL_EHDB_EVENTLOG_BACKEND=local_reference it reads the JSONL driver.`

func runScan(c *cli, args []string) int {
	s := newOneShard("scan", "[--dir PATH] [--shard N] [--after N] [--limit N]", scanAbout)
	page := addPageFlags(s.f)
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	env, opts, n, err := s.resolve(c)
	if err == nil {
		err = page.check()
	}
	if err == nil {
		err = existingRoot(opts.Dir)
	}
	if err != nil {
		return c.fail(err)
	}
	opts.BucketURL = "" // a scan reads the directory only
	l, err := backendOf(env).open(c, opts, n, openRead)
	if err != nil {
		return c.fail(err)
	}
	if l == nil {
		return c.emit(scanOf(localseg.Page{Base: 1}))
	}
	p, err := l.Scan(c.ctx, page.after, page.limit)
	c.closeLog(l)
	if err != nil {
		return c.fail(err)
	}
	return c.emit(scanOf(p))
}

const readAbout = `
Reads one execution's events in shard --shard. When the directory holds the
shard it is read there, read-only ("served_by":"owner_resident"); otherwise,
with a bucket (--bucket or BUCKETLOG_BUCKET_URL), the shard is cold-loaded
from the bucket alone into a temporary directory that is removed afterwards
("served_by":"non_owner_cold_load"); with neither it reads as empty.
Routing an execution to its owner shard is the affinity drive's job
(durable-eventlog-affinity-read). Output:
  {"action":"eventlog-read-exec","execution_id","exists","base","clamped",
   "record_count","returned","records":[…],"shard","served_by"}
with the fields of scan. Under NOETL_EHDB_EVENTLOG_BACKEND=local_reference it
reads the JSONL driver.`

func runRead(c *cli, args []string) int {
	s := newOneShard("read", "--execution-id ID [--dir PATH] [--shard N] [--after N] [--limit N] [--bucket URL]", readAbout)
	execID := s.f.String("execution-id", "", "the execution `ID` (required)")
	page := addPageFlags(s.f)
	bucket := addBucketFlag(s.f, "cold-load the shard from this bucket when the directory does not hold it")
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	if err := requireFlags(s.f, "execution-id"); err != nil {
		return c.fail(err)
	}
	env, opts, n, err := s.resolve(c)
	if err == nil {
		err = page.check()
	}
	if err != nil {
		return c.fail(err)
	}
	id, err := checkName("execution_id", *execID)
	if err != nil {
		return c.fail(err)
	}
	url, err := bucket.value(s.f, env)
	if err != nil {
		return c.fail(err)
	}
	if url == "" {
		if err := existingRoot(opts.Dir); err != nil {
			return c.fail(err)
		}
	}
	b := backendOf(env)
	if err := b.refuseFlags(c, s.f, env, "bucket"); err != nil {
		return c.fail(err)
	}
	opts.BucketURL = url // cold-load the shard when the directory does not hold it
	l, err := b.open(c, opts, n, openRead)
	if err != nil {
		return c.fail(err)
	}
	if l == nil {
		return c.emit(readOf(id, n, affinity.ServedByOwnerResident, localseg.Page{Base: 1}))
	}
	res, err := l.ReadExecution(c.ctx, id, page.after, page.limit)
	c.closeLog(l)
	if err != nil {
		return c.fail(err)
	}
	return c.emit(readOf(id, n, res.ServedBy, res.Page))
}

// coldView cold-loads shard n from the bucket read-only (what the engine's
// non-owner read does) for one read. The engine offers this only to an
// owner opened writable over another shard, so the command calls the cold
// load itself.
func (c *cli) coldView(url string, n int) (shardLog, error) {
	b, err := blobtier.Open(c.ctx, url, blobtier.Options{})
	if err != nil {
		return nil, usagef("%v", err)
	}
	cold, err := coldload.OpenCold(c.ctx, b, uint32(n))
	if err != nil {
		b.Close()
		return nil, err
	}
	closeAll := func() error { cold.Close(); b.Close(); return nil }
	return &verbLog{v: cold, shard: n, servedBy: affinity.ServedByNonOwnerColdLoad, close: closeAll}, nil
}
