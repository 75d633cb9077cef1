package localseg_test

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// A retry across an open whose transaction-window rebuild stopped at a
// damaged sealed segment (no copy heals it yet): the window has a hole, so
// an append whose transaction id it does not hold is refused as a
// retryable storage error and nothing is written — it could be a retry of
// an event in the hole — while a retry of an event after the hole is
// answered as a duplicate. Once a verified copy heals the segment the
// window is rebuilt in full and the refused retry is answered as a
// duplicate of its original. RED control: without the check the retry is
// written a second time.
func TestRetryAcrossADamagedSegmentIsNeverWrittenTwice(t *testing.T) {
	dir := t.TempDir()
	want, seg, good := healFixture(t, dir)
	flip(t, seg, len(good)/2)
	s := openT(t, dir, small)
	defer s.Close()
	if _, err := s.HealFrom(2, (&copies{}).HealCopy); !errors.Is(err, localseg.ErrNoGoodCopy) {
		t.Fatalf("heal without a copy: %v, want ErrNoGoodCopy", err)
	}
	tip := s.Tip()
	first, last := want[0], want[len(want)-1]
	retry := func(r localseg.Record) (localseg.AppendResult, error) {
		return s.Append(localseg.Event{ExecutionID: r.ExecutionID, TransactionID: r.TransactionID, Payload: r.Payload})
	}
	res, err := retry(first)
	if !errors.Is(err, localseg.ErrTxWindowIncomplete) || errors.Is(err, localseg.ErrInvalidState) || errors.Is(err, localseg.ErrInvalidInput) {
		t.Fatalf("retry of sequence %d while the window has a hole: %+v, %v; want ErrTxWindowIncomplete (storage class)", first.Seq, res, err)
	}
	if _, err := s.AppendEvents([]localseg.Event{{ExecutionID: "x", TransactionID: "new-1", Payload: "p"}}); !errors.Is(err, localseg.ErrTxWindowIncomplete) {
		t.Fatalf("batch with an id the window does not hold: %v, want ErrTxWindowIncomplete", err)
	}
	if got := s.Tip(); got != tip {
		t.Fatalf("tip %d after refused appends, want %d (nothing written)", got, tip)
	}
	if res, err := retry(last); err != nil || !res.Duplicate || res.Seq != last.Seq {
		t.Fatalf("retry of sequence %d (after the hole): %+v, %v; want a duplicate", last.Seq, res, err)
	}
	if healed, err := s.HealFrom(2, (&copies{data: map[uint64][]byte{2: good}}).HealCopy); !healed || err != nil {
		t.Fatalf("heal from a verified copy: %v, %v", healed, err)
	}
	if res, err := retry(first); err != nil || !res.Duplicate || res.Seq != first.Seq {
		t.Fatalf("retry of sequence %d after the heal: %+v, %v; want a duplicate of it", first.Seq, res, err)
	}
	if got := s.Tip(); got != tip {
		t.Fatalf("tip %d after the retries, want %d", got, tip)
	}
	if _, err := s.Append(localseg.Event{ExecutionID: "x", TransactionID: "new-1", Payload: "p"}); err != nil {
		t.Fatalf("a new event after the heal: %v", err)
	}
}
