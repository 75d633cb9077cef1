package sections

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bench/internal/targets"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// What the bucket sections (restore, tail, gc) share.

// BucketPayload is the payload size of the events the bucket sections
// append: the same as the stores of the open and memory sections.
const BucketPayload = StorePayload

// warnLogger keeps the engine's info lines (every reclaim, every seal) off
// the bench's stderr; warnings and errors still show.
func warnLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// eventSource makes the bench's events: payload p, execution ids round
// robin over execs, a transaction id per event.
type eventSource struct {
	p    *targets.Payload
	ids  []string
	next uint64
}

func newEventSource(payload, execs int) *eventSource {
	p := targets.MakePayload(payload)
	return &eventSource{p: &p, ids: targets.ExecIDs(execs)}
}

// event returns the next event.
func (s *eventSource) event() localseg.Event {
	s.next++
	return localseg.Event{ExecutionID: s.ids[int(s.next%uint64(len(s.ids)))], TransactionID: targets.TxnID(s.next), Payload: s.p.S}
}

// batch returns the next n events.
func (s *eventSource) batch(n int) []localseg.Event {
	evs := make([]localseg.Event, n)
	for i := range evs {
		evs[i] = s.event()
	}
	return evs
}

// appendEvents appends n events to l in batches of at most
// targets.BuildBatch (one durable group each).
func appendEvents(ctx context.Context, l *bucketlog.Log, src *eventSource, n int) error {
	for n > 0 {
		k := min(n, targets.BuildBatch)
		if _, err := l.AppendBatch(ctx, src.batch(k)); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// localBytes is the size of every segment of l's store: the frame bytes it
// holds.
func localBytes(l *bucketlog.Log) (int64, localseg.Snapshot, error) {
	snap, err := l.Store().Snapshot()
	if err != nil {
		return 0, snap, err
	}
	var n int64
	for _, s := range snap.Segments {
		n += s.Size
	}
	return n, snap, nil
}

// segmentObjects lists shard 0's segment objects: keys and total bytes.
func segmentObjects(ctx context.Context, b blobtier.Bucket) ([]string, int64, error) {
	var keys []string
	var total int64
	for info, err := range b.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			return nil, 0, err
		}
		if info.ParseErr != nil {
			return nil, 0, fmt.Errorf("unexpected key %s in the bench bucket: %w", info.Key, info.ParseErr)
		}
		keys = append(keys, info.Key)
		total += info.Size
	}
	return keys, total, nil
}

// mib prints a byte count in MiB.
func mibLabel(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
}
