package main

import (
	"context"
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// prefixVerbs answers every batch as localseg.Store does when a rollover
// fails after a seal's fsync covered the batch's first events: the
// durable prefix first..last with the error.
type prefixVerbs struct {
	storeVerbs
	first, last uint64
	err         error
}

func (p prefixVerbs) AppendBatch([]localseg.Event) (uint64, uint64, error) {
	return p.first, p.last, p.err
}

// TestVerbLogBatchKeepsTheDurablePrefix: a batch through verbLog that fails
// after a prefix became durable answers that prefix with the error (the
// CLI's and the HTTP batch's durable_prefix), not an empty result that
// would have the client send the durable events again.
func TestVerbLogBatchKeepsTheDurablePrefix(t *testing.T) {
	failed := errors.New("create segment 2: input/output error")
	evs := make([]localseg.Event, 5)
	for i := range evs {
		evs[i] = localseg.Event{ExecutionID: "e", TransactionID: string(rune('a' + i)), Payload: "p"}
	}
	l := &verbLog{v: prefixVerbs{first: 11, last: 12, err: failed}}
	res, err := l.AppendBatch(context.Background(), evs)
	if !errors.Is(err, failed) {
		t.Fatalf("the batch answered %v, want the store's error", err)
	}
	if res.Appended != 2 || res.FirstSequence != 11 || res.LastSequence != 12 {
		t.Fatalf("the batch answered %+v; want its durable prefix, 2 events at 11..12", res)
	}
	out, report, _ := batchAnswer(len(evs), res, err)
	if report == nil || out.DurablePrefix != 2 {
		t.Fatalf("the batch's answer: durable_prefix %d (report %v), want 2", out.DurablePrefix, report)
	}

	// An error with nothing durable answers nothing.
	l = &verbLog{v: prefixVerbs{err: failed}}
	if res, err := l.AppendBatch(context.Background(), evs); !errors.Is(err, failed) || res.Appended != 0 || res.FirstSequence != 0 {
		t.Fatalf("a batch of which nothing is durable answered %+v, %v", res, err)
	}
}
