package main

import (
	"net/http"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// Retry-safe appends (localseg/txwindow.go): an append whose transaction id
// is among the shard's newest --transaction-window events is answered with
// the original sequence and "duplicate":true (HTTP 200, exit 0) instead of
// being written again; the same id with another execution id or payload is
// refused as invalid_state (409, exit 3) naming the sequence that holds it.

// retryNote is what the append help texts say about retries.
const retryNote = `Retries are safe: an append whose transaction id is among the shard's newest
--transaction-window events (default 100000; they survive restarts, crashes,
hydrate and restore; a reclaimed event's id is forgotten) is not written
again: the same execution id and payload answer the original sequence with
"duplicate":true (HTTP 200, exit 0); other content under that id is refused
(invalid_state, HTTP 409, exit 3) naming the sequence that holds it. In a
batch each event is checked: "duplicates":[{"index","global_sequence"}]
lists those not written. (The local_reference backend does not de-duplicate.)`

// txnWindowFlag is --transaction-window.
type txnWindowFlag struct{ n int }

func addTxnWindowFlag(f *flagSet) *txnWindowFlag {
	w := &txnWindowFlag{}
	f.IntVar(&w.n, "transaction-window", 0, "how many of the shard's newest transaction ids an append is checked against, 34 bytes each (default 100000; negative: retries are written again)")
	return w
}

// apply puts the flag into o when it is set.
func (w *txnWindowFlag) apply(f *flagSet, o *bucketlog.Options) {
	if f.isSet("transaction-window") {
		o.TransactionWindow = w.n
		if w.n == 0 {
			o.TransactionWindow = localseg.DefaultTransactionWindow
		}
	}
}

// appendStatus is the HTTP status of an append that wrote nothing because
// every event was a duplicate (200), or wrote something (201).
func appendStatus(wrote bool) int {
	if wrote {
		return http.StatusCreated
	}
	return http.StatusOK
}
