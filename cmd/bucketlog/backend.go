package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/internal/localref"
	"github.com/bucketlog/bucketlog/localseg"
)

// backend is the storage engine behind the log commands: the durable
// segment store (the engine) or the local_reference JSONL driver, as
// NOETL_EHDB_EVENTLOG_BACKEND selects (backendOf is the one place that
// asks). Both implement it, so a command opens a shard and works on it
// without branching on which one it runs on.
type backend interface {
	// open opens shard n of opts.Dir for a command of kind mode. A nil
	// shardLog with a nil error is a shard that holds nothing, which mode
	// does not create.
	open(c *cli, opts bucketlog.Options, n int, mode openMode) (shardLog, error)
	// refuseFlags refuses the flags among names that are set and that the
	// backend cannot honour (local_reference never ships: the bucket
	// flags; a bucket from the environment is ignored with a warning).
	refuseFlags(c *cli, f *flagSet, env envConfig, names ...string) error
	// durable reports whether the backend is the durable segment store
	// (serve and selfcheck run on nothing else).
	durable() bool
}

// openMode is what a command does with the shard it opens.
type openMode int

const (
	// openAppend opens the shard writable, creating it when absent.
	openAppend openMode = iota
	// openRead opens the shard read-only (no lock, nothing written). With
	// a bucket (opts.BucketURL) a shard the directory does not hold is
	// cold-loaded from the bucket.
	openRead
	// openWrite opens an existing shard writable (tail, ack,
	// consumer-delete); a shard that holds nothing is not created.
	openWrite
)

// shardLog is one open shard: *bucketlog.Log, or the context-free verbs of
// a store (localseg.Store, the local_reference driver) behind verbLog.
type shardLog interface {
	Append(ctx context.Context, ev localseg.Event) (localseg.AppendResult, error)
	AppendBatch(ctx context.Context, evs []localseg.Event) (bucketlog.BatchResult, error)
	Scan(ctx context.Context, after uint64, limit int) (localseg.Page, error)
	ReadExecution(ctx context.Context, executionID string, after uint64, limit int) (bucketlog.ReadResult, error)
	Pull(ctx context.Context, consumer string, limit int) (localseg.PullResult, error)
	Ack(ctx context.Context, consumer string, seq uint64) (uint64, error)
	DeleteConsumer(ctx context.Context, consumer string) error
	Close() error
}

var _ shardLog = (*bucketlog.Log)(nil)

// backendOf returns the backend env selects (exact token; anything else
// keeps the durable store).
func backendOf(env envConfig) backend {
	if env.Backend == BackendLocalReference {
		return localRefBackend{}
	}
	return durableBackend{}
}

// durableBackend is the engine (bucketlog.Open).
type durableBackend struct{}

func (durableBackend) durable() bool { return true }

func (durableBackend) refuseFlags(*cli, *flagSet, envConfig, ...string) error { return nil }

func (durableBackend) open(c *cli, opts bucketlog.Options, n int, mode openMode) (shardLog, error) {
	switch mode {
	case openRead:
		if opts.BucketURL != "" {
			held, err := holdsStore(localseg.ShardDir(opts.Dir, n))
			if err != nil {
				return nil, err
			}
			if !held {
				return c.coldView(opts.BucketURL, n)
			}
		}
		opts.ReadOnly, opts.BucketURL = true, ""
	case openWrite:
		if opts.BucketURL == "" {
			// A shard that holds nothing answers "does not exist"
			// without creating its directory.
			held, err := holdsStore(localseg.ShardDir(opts.Dir, n))
			if err != nil || !held {
				return nil, err
			}
		}
		opts.NoBackground = true
	}
	l, err := bucketlog.Open(c.ctx, opts)
	if err != nil {
		return nil, err // not a typed nil *bucketlog.Log
	}
	return l, nil
}

// localRefBackend is the local_reference JSONL driver. It is not durable
// and exists for parity tests and migration.
type localRefBackend struct{}

func (localRefBackend) durable() bool { return false }

func (localRefBackend) refuseFlags(c *cli, f *flagSet, env envConfig, names ...string) error {
	for _, n := range names {
		if f.isSet(n) {
			return usagef("--%s: the local_reference backend (NOETL_EHDB_EVENTLOG_BACKEND) never ships to a bucket", n)
		}
	}
	if env.BucketURL != "" {
		c.log.Warn("the local_reference backend never ships; BUCKETLOG_BUCKET_URL is ignored")
	}
	return nil
}

// open opens the JSONL driver of shard n. Without openAppend a shard whose
// file does not exist holds nothing: nil, and a read creates nothing.
func (localRefBackend) open(_ *cli, opts bucketlog.Options, n int, mode openMode) (shardLog, error) {
	path := localrefPath(opts.Dir, n)
	if mode != openAppend {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	d, err := localref.Open(path, localref.Options{SegmentMaxBytes: segMax(opts)})
	if err != nil {
		return nil, err
	}
	return &verbLog{v: d, shard: n, servedBy: bucketlog.ServedByOwnerResident, close: d.Close}, nil
}

func localrefPath(dir string, shard int) string {
	return filepath.Join(localseg.ShardDir(dir, shard), localrefFile)
}

// storeVerbs are the context-free verbs localseg.Store and the
// local_reference driver share.
type storeVerbs interface {
	Append(ev localseg.Event) (localseg.AppendResult, error)
	AppendBatch(evs []localseg.Event) (first, last uint64, err error)
	Scan(after uint64, limit int) (localseg.Page, error)
	ReadExecution(executionID string, after uint64, limit int) (localseg.Page, error)
	Pull(consumer string, limit int) (localseg.PullResult, error)
	Ack(consumer string, seq uint64) (uint64, error)
	DeleteConsumer(consumer string) error
}

var _ storeVerbs = (*localref.Driver)(nil)
var _ storeVerbs = (*localseg.Store)(nil)

// verbLog is a shardLog over storeVerbs: shard n, served as servedBy.
type verbLog struct {
	v        storeVerbs
	shard    int
	servedBy string
	close    func() error
}

func (l *verbLog) Append(_ context.Context, ev localseg.Event) (localseg.AppendResult, error) {
	return l.v.Append(ev)
}

// AppendBatch answers a batch that failed after a prefix became durable
// (localseg.Store.AppendBatch: first..last with the error) with that
// prefix, as bucketlog.Log.AppendBatch does, so batchAnswer reports its
// durable_prefix.
func (l *verbLog) AppendBatch(_ context.Context, evs []localseg.Event) (bucketlog.BatchResult, error) {
	first, last, err := l.v.AppendBatch(evs)
	if err != nil {
		if first == 0 || last < first {
			return bucketlog.BatchResult{}, err
		}
		return bucketlog.BatchResult{Appended: int(last - first + 1), FirstSequence: first, LastSequence: last}, err
	}
	return bucketlog.BatchResult{Appended: len(evs), FirstSequence: first, LastSequence: last}, nil
}

func (l *verbLog) Scan(_ context.Context, after uint64, limit int) (localseg.Page, error) {
	return l.v.Scan(after, limit)
}

func (l *verbLog) ReadExecution(_ context.Context, id string, after uint64, limit int) (bucketlog.ReadResult, error) {
	p, err := l.v.ReadExecution(id, after, limit)
	return bucketlog.ReadResult{Page: p, Shard: l.shard, ServedBy: l.servedBy}, err
}

func (l *verbLog) Pull(_ context.Context, consumer string, limit int) (localseg.PullResult, error) {
	return l.v.Pull(consumer, limit)
}

func (l *verbLog) Ack(_ context.Context, consumer string, seq uint64) (uint64, error) {
	return l.v.Ack(consumer, seq)
}

func (l *verbLog) DeleteConsumer(_ context.Context, consumer string) error {
	return l.v.DeleteConsumer(consumer)
}

func (l *verbLog) Close() error { return l.close() }
