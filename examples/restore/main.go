// Command restore is a disaster-recovery restore: a machine lost its disk,
// and one shard of the event log is rebuilt on a new machine from the
// bucket alone.
//
//	go run ./examples/restore                                   # self-contained scenario
//	go run ./examples/restore -bucket s3://my-bucket?region=eu-west-1 -shard 0 -dir /var/lib/log
//
// With -bucket it restores shard -shard into -dir (which must not hold a
// store yet) and prints what it recovered. Without -bucket it plays the
// whole disaster first: it starts an S3 emulator (gofakes3, through
// bucketlogtest) in the process, writes events to a shard that ships to it, closes the shard
// (which ships the tail), deletes the disk, and then restores — so it runs
// with no setup and shows that nothing acknowledged was lost.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

// config is what the restore runs with.
type config struct {
	bucketURL string // "" plays the self-contained scenario
	shard     int
	dir       string // "" uses a temporary directory, removed at the end
}

func main() {
	var cfg config
	flag.StringVar(&cfg.bucketURL, "bucket", "", "bucket URL to restore from (empty: a self-contained scenario on an in-process S3 emulator)")
	flag.IntVar(&cfg.shard, "shard", 0, "the shard to restore")
	flag.StringVar(&cfg.dir, "dir", "", "the empty directory to restore into (default: a temporary one, removed at exit)")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "restore:", err)
		os.Exit(1)
	}
}

// recovered is what a restore brought back.
type recovered struct {
	Events      int
	First, Last uint64
	Base        uint64 // first retained sequence
	Executions  int
	Consumers   map[string]uint64
	Objects     int
	Bytes       int64
	Seconds     float64
	// payloads holds every event's payload by sequence when asked to
	// (the scenario checks them all).
	payloads          map[uint64]string
	ContinuesAt       uint64 // the sequence the next append gets
	FromTailObjects   int
	ShippedThroughSeq uint64
}

// run restores cfg.shard from cfg.bucketURL (after playing the disaster
// when there is no bucket) and prints what it recovered.
func run(ctx context.Context, cfg config, out io.Writer) error {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var want map[uint64]string // the scenario's acknowledged payloads
	if cfg.bucketURL == "" {
		s3, err := bucketlogtest.StartS3()
		if err != nil {
			return err
		}
		defer s3.Close()
		if err := s3.CreateBucket("dr"); err != nil {
			return err
		}
		cfg.bucketURL = s3.URL("dr")
		if want, err = disaster(ctx, cfg, out, quiet); err != nil {
			return err
		}
	}
	if cfg.dir == "" {
		tmp, err := os.MkdirTemp("", "restore-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		cfg.dir = tmp
	}

	rec, err := restore(ctx, cfg, quiet, want != nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "restored shard %d into %s from the bucket alone in %.3fs (%d objects, %d bytes)\n",
		cfg.shard, bucketlog.ShardDir(cfg.dir, cfg.shard), rec.Seconds, rec.Objects, rec.Bytes)
	fmt.Fprintf(out, "  events %d..%d (%d events of %d executions; %d from tail objects, the rest from sealed segments)\n",
		rec.First, rec.Last, rec.Events, rec.Executions, rec.FromTailObjects)
	for name, seq := range rec.Consumers {
		fmt.Fprintf(out, "  consumer %s at sequence %d\n", name, seq)
	}
	fmt.Fprintf(out, "  the bucket had shipped through %d; opened with its bucket, the shard continues at sequence %d\n", rec.ShippedThroughSeq, rec.ContinuesAt)
	if want != nil {
		if err := check(rec, want); err != nil {
			return err
		}
		fmt.Fprintf(out, "  every one of the %d acknowledged events is back with its exact payload: nothing lost\n", len(want))
	}
	return nil
}

// disaster writes events to a shard shipping to the bucket, closes it and
// deletes its disk. It returns every acknowledged payload by sequence.
func disaster(ctx context.Context, cfg config, out io.Writer, logger *slog.Logger) (map[uint64]string, error) {
	disk, err := os.MkdirTemp("", "restore-example-lost-disk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(disk)
	l, err := bucketlog.Open(ctx, bucketlog.Options{
		Dir: disk, ShardIndex: cfg.shard, ShardCount: cfg.shard + 1, BucketURL: cfg.bucketURL,
		SegmentMaxBytes: 16 << 10, // small, so some segments seal and ship whole
		Logger:          logger,
	})
	if err != nil {
		return nil, err
	}
	want := map[uint64]string{}
	own := l.Ownership()
	for i := 1; i <= 500; i++ {
		exec := ownedBy(own.Owns, i%25)
		payload := fmt.Sprintf(`{"invoice":%d,"amount":"%d.%02d €","note":"<paid> & filed"}`, i, i*3, i%100)
		res, err := l.Append(ctx, bucketlog.Event{ExecutionID: exec, TransactionID: fmt.Sprint("tx-", i), Payload: payload})
		if err != nil {
			l.Close()
			return nil, err
		}
		want[res.Seq] = payload
	}
	if _, err := l.Pull(ctx, "billing", 100); err != nil {
		l.Close()
		return nil, err
	}
	if _, err := l.Ack(ctx, "billing", 100); err != nil {
		l.Close()
		return nil, err
	}
	// Close ships the tail (the events of the unsealed segment) one last
	// time; a crash instead would lose at most one tail interval.
	if err := l.Close(); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(disk); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "scenario: 500 events appended to shard %d shipping to an in-process S3 emulator; consumer billing acked 100; shard closed; its disk deleted\n", cfg.shard)
	return want, nil
}

// restore rebuilds the shard and reads back what it holds.
func restore(ctx context.Context, cfg config, logger *slog.Logger, keepPayloads bool) (recovered, error) {
	// The report counts every object read (watermark, cursor, segments and
	// tail objects); RestoreOptions.Progress would report them as they come.
	rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{BucketURL: cfg.bucketURL, Shard: cfg.shard, Dir: cfg.dir})
	if err != nil {
		return recovered{}, fmt.Errorf("restore shard %d: %w", cfg.shard, err)
	}
	rec := recovered{First: rep.FirstSeq, Last: rep.LastSeq, Seconds: rep.Seconds, FromTailObjects: rep.TailRecords,
		Objects: rep.Objects, Bytes: rep.Bytes, ShippedThroughSeq: rep.ShippedThrough}

	// Read everything back from the restored directory alone.
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: cfg.dir, ShardIndex: cfg.shard, ShardCount: cfg.shard + 1, ReadOnly: true, Logger: logger})
	if err != nil {
		return rec, err
	}
	execs := map[string]bool{}
	if keepPayloads {
		rec.payloads = map[uint64]string{}
	}
	after := uint64(0)
	for {
		page, err := l.Scan(ctx, after, 10000)
		if err != nil {
			l.Close()
			return rec, err
		}
		rec.Base = page.Base
		for _, r := range page.Records {
			rec.Events++
			execs[r.ExecutionID] = true
			if keepPayloads {
				rec.payloads[r.Seq] = r.Payload
			}
			after = r.Seq
		}
		if len(page.Records) == 0 || uint64(len(page.Records)) == page.RecordCount {
			break
		}
	}
	rec.Executions = len(execs)
	snap, err := l.Store().Snapshot()
	l.Close()
	if err != nil {
		return rec, err
	}
	rec.Consumers = snap.Consumers

	// The restored directory is a working shard: it records its bucket
	// (bucket.json), and its owner opening it with that bucket continues
	// the sequence. The example leaves it as restored (opening it writable
	// would make this process the shard's writer).
	rec.ContinuesAt = snap.Tip + 1
	return rec, nil
}

// check compares a scenario's restore with what was acknowledged.
func check(rec recovered, want map[uint64]string) error {
	if rec.Events != len(want) || rec.First != 1 || rec.Last != uint64(len(want)) {
		return fmt.Errorf("recovered %d events %d..%d; %d were acknowledged", rec.Events, rec.First, rec.Last, len(want))
	}
	for seq, p := range want {
		if got, ok := rec.payloads[seq]; !ok || got != p {
			return fmt.Errorf("sequence %d: restored %q (present: %v), acknowledged %q", seq, got, ok, p)
		}
	}
	if rec.Consumers["billing"] != 100 {
		return fmt.Errorf("consumer billing restored at %d, acked 100", rec.Consumers["billing"])
	}
	return nil
}

// ownedBy returns the n-th execution id the shard owns (owns is the log's
// Ownership().Owns).
func ownedBy(owns func(executionID string) bool, n int) string {
	for i, found := 0, 0; ; i++ {
		id := fmt.Sprint("inv-", i)
		if owns(id) {
			if found == n {
				return id
			}
			found++
		}
	}
}
