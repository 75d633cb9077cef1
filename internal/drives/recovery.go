package drives

import (
	"fmt"
	"strings"

	"github.com/bucketlog/bucketlog/localseg"
)

// RecoveryDriver names the engine the recovery drive exercises.
const RecoveryDriver = "ehdb-durable-segment"

// DefaultRecoveryConsumer is the consumer the recovery drive acks with when
// none is given.
const DefaultRecoveryConsumer = "recovery-drive"

// RecoveryReport is the outcome of the recovery drive, shaped as the seed's
// durable-eventlog-recovery output.
type RecoveryReport struct {
	Driver    string          `json:"driver"`
	Recovered bool            `json:"recovered"`
	Report    RecoveryDetails `json:"report"`
}

// RecoveryDetails are the observations of the recovery drive.
type RecoveryDetails struct {
	// Appended is how many events were appended before the restart.
	Appended int `json:"appended"`
	// ZeroLoss: every appended event is present after the restart.
	ZeroLoss bool `json:"zero_loss"`
	// OrderingOK: sequences are gapless from 1 in append order.
	OrderingOK bool `json:"ordering_ok"`
	// ScopeOK: each execution reads back exactly its own events, in order.
	ScopeOK bool `json:"scope_ok"`
	// PayloadsMatch: every payload is byte-identical.
	PayloadsMatch bool `json:"payloads_match"`
	// CursorSurvived: the consumer exists after the restart with the cursor
	// it acked before.
	CursorSurvived bool `json:"cursor_survived"`
	// PendingAfterRestart is the consumer's pending count after the restart.
	PendingAfterRestart uint64 `json:"pending_after_restart"`
	// Divergence describes the first problem found, or is null.
	Divergence *string `json:"divergence"`
}

// Holds reports whether every check passed and nothing diverged.
func (r RecoveryReport) Holds() bool {
	d := r.Report
	return d.ZeroLoss && d.OrderingOK && d.ScopeOK && d.PayloadsMatch && d.CursorSurvived && d.Divergence == nil
}

// recoveryEvents is the drive's deterministic event set: two executions,
// payloads with HTML metacharacters, quotes, backslashes, control
// characters, non-ASCII text and the two JSON-hostile separators.
func recoveryEvents() []localseg.Event {
	return []localseg.Event{
		{ExecutionID: "100", TransactionID: "txn-100-1", Payload: `{"step":"start","html":"<a href=\"x\">&amp; é — 日本</a>"}`},
		{ExecutionID: "200", TransactionID: "txn-200-1", Payload: "C:\\path\\to \"quoted\" <b>&</b> \u2028\u2029 🚀"},
		{ExecutionID: "100", TransactionID: "txn-100-2", Payload: "tab\tnewline\n'single' \\\" end"},
	}
}

// recoveryHooks let tests damage the store between the two phases (RED
// controls). Production runs use the zero value.
type recoveryHooks struct {
	// afterClose runs on the shard directory after the first store is
	// closed and before the fresh one opens.
	afterClose func(shardDir string) error
}

// Recovery is the crash-recovery drive (CHECKLIST §1.13): on a fresh root it
// appends a deterministic event set over two executions to the store of
// shard 0 (<root>/shard-0000), pulls and acks the first event for consumer
// (DefaultRecoveryConsumer when empty), closes the store, opens a fresh one
// over the same directory (a simulated restart: nothing is carried over in
// memory), and checks zero loss, ordering, per-execution scope, payload
// fidelity, cursor survival and the pending count.
//
// It refuses (ErrUsage) an empty root, a root that already holds anything
// and a consumer name that is not a valid identifier. A problem found after
// the restart is reported in the report (Holds false), not as an error; an
// error means the drive could not run.
func Recovery(root string, consumer string) (RecoveryReport, error) {
	return recovery(root, consumer, recoveryEvents(), recoveryHooks{})
}

func recovery(root, consumer string, events []localseg.Event, hooks recoveryHooks) (RecoveryReport, error) {
	if len(events) == 0 {
		return RecoveryReport{}, usagef("the recovery drive needs at least one event")
	}
	consumer = strings.TrimSpace(consumer)
	if consumer == "" {
		consumer = DefaultRecoveryConsumer
	}
	if err := validIdentifier(consumer); err != nil {
		return RecoveryReport{}, usagef("consumer: %v", err)
	}
	if err := prepareRoot(root); err != nil {
		return RecoveryReport{}, err
	}
	dir := localseg.ShardDir(root, 0)

	// Phase 1: append, consume one, ack it, close.
	st, err := localseg.Open(dir, localseg.Options{})
	if err != nil {
		return RecoveryReport{}, fmt.Errorf("recovery drive: open: %w", err)
	}
	for i, ev := range events {
		if _, err := st.Append(ev); err != nil {
			st.Close()
			return RecoveryReport{}, fmt.Errorf("recovery drive: append event %d: %w", i, err)
		}
	}
	if _, err := st.Pull(consumer, 1); err != nil {
		st.Close()
		return RecoveryReport{}, fmt.Errorf("recovery drive: pull: %w", err)
	}
	const acked uint64 = 1
	if _, err := st.Ack(consumer, acked); err != nil {
		st.Close()
		return RecoveryReport{}, fmt.Errorf("recovery drive: ack: %w", err)
	}
	if err := st.Close(); err != nil {
		return RecoveryReport{}, fmt.Errorf("recovery drive: close: %w", err)
	}
	if hooks.afterClose != nil {
		if err := hooks.afterClose(dir); err != nil {
			return RecoveryReport{}, fmt.Errorf("recovery drive: hook: %w", err)
		}
	}

	// Phase 2: a fresh store over the same directory.
	rep := RecoveryReport{Driver: RecoveryDriver, Report: RecoveryDetails{Appended: len(events)}}
	var c checks
	verifyRecovery(dir, consumer, events, acked, &rep.Report, &c)
	rep.Report.Divergence = c.first
	rep.Recovered = rep.Holds()
	return rep, nil
}

// verifyRecovery opens the store after the restart and fills d; every
// problem goes to c.
func verifyRecovery(dir, consumer string, events []localseg.Event, acked uint64, d *RecoveryDetails, c *checks) {
	st, err := localseg.Open(dir, localseg.Options{})
	if err != nil {
		c.fail("reopen after restart: %v", err)
		return
	}
	defer func() {
		if err := st.Close(); err != nil {
			c.fail("close after restart: %v", err)
		}
	}()
	n := uint64(len(events))
	page, err := st.Scan(0, len(events)+1)
	if err != nil {
		c.fail("scan after restart: %v", err)
		return
	}
	d.ZeroLoss = true
	if !page.Exists || page.RecordCount != n || uint64(len(page.Records)) != n || st.Tip() != n {
		d.ZeroLoss = c.fail("after restart the log holds %d records (tip %d, exists %v), want %d", page.RecordCount, st.Tip(), page.Exists, n)
	}
	d.OrderingOK, d.PayloadsMatch = true, true
	for i, rec := range page.Records {
		if i >= len(events) {
			d.OrderingOK = c.fail("record %d beyond the %d appended", rec.Seq, n)
			break
		}
		want := events[i]
		if rec.Seq != uint64(i+1) || rec.ExecutionID != strings.TrimSpace(want.ExecutionID) || rec.TransactionID != want.TransactionID {
			d.OrderingOK = c.fail("position %d holds sequence %d of %s/%s, want sequence %d of %s/%s", i, rec.Seq, rec.ExecutionID, rec.TransactionID, i+1, want.ExecutionID, want.TransactionID)
		}
		if rec.Payload != want.Payload {
			d.PayloadsMatch = c.fail("sequence %d payload %q, want %q", rec.Seq, rec.Payload, want.Payload)
		}
	}
	if uint64(len(page.Records)) < n {
		d.OrderingOK, d.PayloadsMatch = false, false
	}

	// Per-execution scope.
	d.ScopeOK = true
	wantByExec := map[string][]uint64{}
	var order []string
	for i, ev := range events {
		id := strings.TrimSpace(ev.ExecutionID)
		if _, ok := wantByExec[id]; !ok {
			order = append(order, id)
		}
		wantByExec[id] = append(wantByExec[id], uint64(i+1))
	}
	for _, id := range order {
		want := wantByExec[id]
		p, err := st.ReadExecution(id, 0, len(events)+1)
		if err != nil {
			d.ScopeOK = c.fail("read execution %s: %v", id, err)
			continue
		}
		if p.RecordCount != uint64(len(want)) || len(p.Records) != len(want) {
			d.ScopeOK = c.fail("execution %s reads %d records, want %d", id, len(p.Records), len(want))
			continue
		}
		for j, rec := range p.Records {
			if rec.Seq != want[j] || rec.ExecutionID != id || rec.Payload != events[want[j]-1].Payload {
				d.ScopeOK = c.fail("execution %s record %d is sequence %d of %s, want sequence %d", id, j, rec.Seq, rec.ExecutionID, want[j])
			}
		}
	}

	// Cursor survival.
	pr, err := st.Pull(consumer, len(events))
	switch {
	case err != nil:
		c.fail("pull after restart: %v", err)
	case pr.Created:
		c.fail("consumer %s was lost in the restart (the pull re-created it)", consumer)
	case pr.Acked != acked:
		c.fail("consumer %s cursor is %d after the restart, want %d", consumer, pr.Acked, acked)
	default:
		d.CursorSurvived = true
	}
	if err == nil {
		d.PendingAfterRestart = pr.Pending
		if d.CursorSurvived && (pr.Pending != n-acked || len(pr.Records) == 0 || pr.Records[0].Seq != acked+1) {
			d.CursorSurvived = c.fail("consumer %s has %d pending after the restart, want %d", consumer, pr.Pending, n-acked)
		}
	}
}

// validIdentifier applies the identifier rule of docs/FORMAT.md §2.6 to an already
// trimmed name.
func validIdentifier(id string) error {
	if id == "" || len(id) > localseg.MaxIDLen {
		return fmt.Errorf("%q must be 1 to %d bytes", id, localseg.MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%q has a character outside [A-Za-z0-9_-]", id)
		}
	}
	return nil
}
