package main

import (
	"errors"

	"github.com/bucketlog/bucketlog"
)

// batchAnswer is the answer to a batch of n events, for POST /v1/events and
// the append command alike: the output, and with an error the report to
// give beside it (nil: the error alone). A storage error after a prefix of
// the batch became durable (bucketlog.Log.AppendBatch) comes with that
// prefix: its sequences (first_sequence..last_sequence), its duplicates,
// and durable_prefix, the number of the batch's leading events that are
// durable, so a client sends only events[durable_prefix:] again. A
// synchronous batch not confirmed in the bucket (ErrNotInBucket) is durable
// whole: its report is the whole result.
func batchAnswer(n int, res bucketlog.BatchResult, err error) (batchOutput, any, error) {
	out := batchOutput{Action: actionAppendBatch, Appended: res.Appended, FirstSequence: res.FirstSequence, LastSequence: res.LastSequence, Duplicates: res.Duplicates}
	switch {
	case errors.Is(err, bucketlog.ErrNotInBucket):
		out.DurablePrefix = n
		return out, out, notInBucket(err, res.FirstSequence, res.LastSequence)
	case err != nil && res.Appended > 0:
		out.DurablePrefix = durablePrefix(n, res)
		return out, out, err
	}
	return out, nil, err
}

// durablePrefix counts the leading events of a batch of n that res names
// durable: its first res.Appended new events (they took consecutive
// sequences in the batch's order) and the duplicates among and right after
// them (res lists only the duplicates whose sequence is durable).
func durablePrefix(n int, res bucketlog.BatchResult) int {
	dup := make(map[int]bool, len(res.Duplicates))
	for _, d := range res.Duplicates {
		dup[d.Index] = true
	}
	p, left := 0, res.Appended
	for ; p < n; p++ {
		if dup[p] {
			continue
		}
		if left == 0 {
			break
		}
		left--
	}
	return p
}
