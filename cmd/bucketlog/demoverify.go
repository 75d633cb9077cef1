package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// countObjects lists the bucket.
func countObjects(ctx context.Context, b *blob.Bucket) (n int, size int64, err error) {
	it := b.List(nil)
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return n, size, nil
		}
		if err != nil {
			return n, size, fmt.Errorf("list the bucket: %w", err)
		}
		n++
		size += obj.Size
	}
}

// verifyRestored opens a restored shard and checks it against what was
// acknowledged: the events above the reclaim base are all there, gapless,
// each with its exact identifiers and payload; nothing above the consumer's
// cursor was reclaimed; the cursor survived; and the restored shard opens
// writable with the bucket and continues the sequence. It returns the
// problems found and the number of events restored.
func verifyRestored(ctx context.Context, o bucketlog.Options, dir string, expected map[uint64]demoEvent, consumer string, acked uint64) ([]string, int, error) {
	ro := o
	ro.Dir, ro.ReadOnly, ro.Bucket = dir, true, nil
	l, err := bucketlog.Open(ctx, ro)
	if err != nil {
		return []string{fmt.Sprintf("shard %d: the restored store does not open: %v", o.ShardIndex, err)}, 0, nil
	}
	page, err := l.Scan(ctx, 0, len(expected)+1)
	var cursor uint64
	var hasCursor bool
	if err == nil {
		var snap localseg.Snapshot
		if snap, err = l.Store().Snapshot(); err == nil {
			cursor, hasCursor = snap.Consumers[consumer]
		}
	}
	l.Close()
	if err != nil {
		return []string{fmt.Sprintf("shard %d: read the restored store: %v", o.ShardIndex, err)}, 0, nil
	}
	problems := compareRestored(o.ShardIndex, page, expected, acked)
	if acked > 0 && (!hasCursor || cursor != acked) {
		problems = append(problems, fmt.Sprintf("shard %d: consumer %s restored at %d (present: %v), acked %d", o.ShardIndex, consumer, cursor, hasCursor, acked))
	}
	if len(problems) > 0 {
		return problems, len(page.Records), nil
	}

	// The restored shard is a working shard: it opens with its bucket and
	// the next append continues the sequence.
	wo := o
	wo.Dir, wo.NoBackground = dir, true
	w, err := bucketlog.Open(ctx, wo)
	if err != nil {
		return []string{fmt.Sprintf("shard %d: the restored store does not open writable: %v", o.ShardIndex, err)}, len(page.Records), nil
	}
	defer w.Close()
	exec := ownedExecution(o.ShardIndex, o.ShardCount)
	res, err := w.Append(ctx, localseg.Event{ExecutionID: exec, TransactionID: "after-restore", Payload: "continues"})
	if err != nil {
		return []string{fmt.Sprintf("shard %d: append after restore: %v", o.ShardIndex, err)}, len(page.Records), nil
	}
	if want := uint64(len(expected)) + 1; res.Seq != want {
		problems = append(problems, fmt.Sprintf("shard %d: the first append after restore got sequence %d, want %d", o.ShardIndex, res.Seq, want))
	}
	return problems, len(page.Records), nil
}

// compareRestored checks a restored page against the acknowledged events.
func compareRestored(shard int, page localseg.Page, expected map[uint64]demoEvent, acked uint64) []string {
	var problems []string
	tip := uint64(len(expected))
	base := max(page.Base, 1)
	if base-1 > acked {
		problems = append(problems, fmt.Sprintf("shard %d: events 1..%d were reclaimed but the consumer acked only %d", shard, base-1, acked))
	}
	if uint64(len(page.Records)) != tip-(base-1) {
		problems = append(problems, fmt.Sprintf("shard %d: %d events restored above the base %d; %d were acknowledged there", shard, len(page.Records), base, tip-(base-1)))
	}
	bad := 0
	for i, r := range page.Records {
		want, ok := expected[r.Seq]
		switch {
		case r.Seq != base+uint64(i):
			problems = append(problems, fmt.Sprintf("shard %d: record %d has sequence %d, want %d (a gap)", shard, i, r.Seq, base+uint64(i)))
			return problems
		case !ok:
			problems = append(problems, fmt.Sprintf("shard %d: sequence %d was never acknowledged", shard, r.Seq))
		case r.ExecutionID != want.exec || r.TransactionID != want.txn || r.Payload != want.payload:
			if bad++; bad <= 3 {
				problems = append(problems, fmt.Sprintf("shard %d: sequence %d differs from what was acknowledged", shard, r.Seq))
			}
		}
	}
	if bad > 3 {
		problems = append(problems, fmt.Sprintf("shard %d: %d events differ in all", shard, bad))
	}
	return problems
}

// ownedExecution is an execution id shard owns of count.
func ownedExecution(shard, count int) string {
	for i := 0; ; i++ {
		if id := fmt.Sprint(i); affinity.ShardFor(id, count) == shard {
			return id
		}
	}
}
