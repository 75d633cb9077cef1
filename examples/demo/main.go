// Command demo runs `bucketlog demo`'s scenario against an S3 emulator
// (gofakes3, started in this process by bucketlogtest), with nothing but
// the public API: two shards, concurrent writers, shipping, consumer acks,
// GC, a lost disk, a restore from the bucket alone, and a check that
// nothing acknowledged was lost.
//
//	go run ./examples/demo
//
// It exits 0 when nothing was lost and 1 naming what was, otherwise. The
// `bucketlog demo` command runs the same scenario on an in-memory bucket,
// so the operator binary links no emulator.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

const (
	shards     = 2
	executions = 100
	writers    = 4
	consumer   = "projector"
)

func main() {
	if err := run(context.Background(), 2000, 200, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// acked is what each shard acknowledged: its payloads by sequence.
type acked [shards]map[uint64]string

// run plays the scenario: events before GC, then more after it (these
// reach the bucket only in tail objects).
func run(ctx context.Context, before, after int, out io.Writer) error {
	s3, err := bucketlogtest.StartS3()
	if err != nil {
		return err
	}
	defer s3.Close()
	bucket, err := s3.NewBucket()
	if err != nil {
		return err
	}
	url := s3.URL(bucket) // anonymous requests: no credentials, no environment
	root, err := os.MkdirTemp("", "bucketlog-example-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	options := func(shard int, disk string) bucketlog.Options {
		return bucketlog.Options{
			Dir: filepath.Join(root, disk), ShardIndex: shard, ShardCount: shards, BucketURL: url,
			SegmentMaxBytes: 16 << 10, // small, so several segments seal, ship and are reclaimed
			TailInterval:    200 * time.Millisecond,
			Logger:          quiet,
		}
	}

	var logs [shards]*bucketlog.Log
	defer func() {
		for _, l := range logs {
			if l != nil {
				l.Close()
			}
		}
	}()
	for i := range logs {
		if logs[i], err = bucketlog.Open(ctx, options(i, fmt.Sprint("disk-", i))); err != nil {
			return err
		}
	}
	var want acked
	for i := range want {
		want[i] = map[uint64]string{}
	}
	if err := appendAll(ctx, logs, &want, 0, before); err != nil {
		return err
	}
	fmt.Fprintf(out, "appended %d events to %d shards shipping to %s\n", before, shards, url)

	// A consumer on each shard acks half its events; GC then reclaims the
	// segments every consumer acked: the watermark first (compare-and-swap),
	// then the local files and the bucket objects below it.
	var ackedThrough, base [shards]uint64
	for i, l := range logs {
		if _, err := l.Ship(ctx, false); err != nil {
			return err
		}
		p, err := l.Pull(ctx, consumer, len(want[i])/2)
		if err != nil {
			return err
		}
		if ackedThrough[i], err = l.Ack(ctx, consumer, p.Records[len(p.Records)-1].Seq); err != nil {
			return err
		}
		gc, err := l.GC(ctx, bucketlog.GCRequest{})
		if err != nil {
			return err
		}
		base[i] = gc.Base
		fmt.Fprintf(out, "shard %d: consumer acked %d; GC reclaimed events 1..%d (%d segments)\n",
			i, ackedThrough[i], gc.Base-1, gc.SegmentsBefore-gc.SegmentsAfter)
	}
	if err := appendAll(ctx, logs, &want, before, after); err != nil {
		return err
	}
	// Close ships the tail one last time; then the disks are lost.
	for i, l := range logs {
		logs[i] = nil
		if err := l.Close(); err != nil {
			return err
		}
		if err := os.RemoveAll(options(i, fmt.Sprint("disk-", i)).Dir); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "appended %d more, closed both shards and deleted their disks\n", after)

	var problems []error
	for i := range shards {
		o := options(i, fmt.Sprint("new-disk-", i))
		rep, err := bucketlog.Restore(ctx, bucketlog.RestoreOptions{BucketURL: url, Shard: i, Dir: o.Dir})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "shard %d: restored events %d..%d from %d objects (%d events from tail objects)\n",
			i, rep.FirstSeq, rep.LastSeq, rep.Objects, rep.TailRecords)
		problems = append(problems, verify(ctx, o, want[i], base[i], ackedThrough[i]))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("lost: %w", err)
	}
	fmt.Fprintln(out, "every event above the reclaim base is back with its exact payload, the cursors kept, the sequences continue: nothing lost")
	return nil
}

// appendAll appends events from..from+n-1 from concurrent writers, each to
// the shard that owns its execution, and records what was acknowledged.
func appendAll(ctx context.Context, logs [shards]*bucketlog.Log, want *acked, from, n int) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := from + w; i < from+n; i += writers {
				exec := fmt.Sprint("order-", i%executions)
				shard := logs[0].Ownership().OwnerOf(exec)
				payload := fmt.Sprintf(`{"order":%q,"step":%d,"note":"<paid> & \"filed\" ✓"}`, exec, i)
				res, err := logs[shard].Append(ctx, bucketlog.Event{ExecutionID: exec, TransactionID: fmt.Sprint("tx-", i), Payload: payload})
				if err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				want[shard][res.Seq] = payload
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// verify opens a restored shard and checks it against what was
// acknowledged: every event from the reclaim base on, gapless, with its
// payload; the consumer's cursor; and, opened with its bucket, the next
// append continues the sequence.
func verify(ctx context.Context, o bucketlog.Options, want map[uint64]string, base, ackedThrough uint64) error {
	l, err := bucketlog.Open(ctx, o)
	if err != nil {
		return fmt.Errorf("shard %d: open the restored shard: %w", o.ShardIndex, err)
	}
	defer l.Close()
	page, err := l.Scan(ctx, 0, len(want)+1)
	if err != nil {
		return err
	}
	tip := uint64(len(want))
	if page.Base != base || uint64(len(page.Records)) != tip-base+1 {
		return fmt.Errorf("shard %d: restored %d events from %d; acknowledged %d..%d", o.ShardIndex, len(page.Records), page.Base, base, tip)
	}
	for i, r := range page.Records {
		if r.Seq != base+uint64(i) || r.Payload != want[r.Seq] {
			return fmt.Errorf("shard %d: sequence %d differs from what was acknowledged", o.ShardIndex, r.Seq)
		}
	}
	p, err := l.Pull(ctx, consumer, 1)
	if err != nil {
		return err
	}
	if p.Acked != ackedThrough {
		return fmt.Errorf("shard %d: the consumer restored at %d, acked %d", o.ShardIndex, p.Acked, ackedThrough)
	}
	res, err := l.Append(ctx, bucketlog.Event{ExecutionID: page.Records[0].ExecutionID, TransactionID: "after-restore", Payload: "continues"})
	if err != nil {
		return err
	}
	if res.Seq != tip+1 {
		return fmt.Errorf("shard %d: the first append after the restore got sequence %d, want %d", o.ShardIndex, res.Seq, tip+1)
	}
	return nil
}
