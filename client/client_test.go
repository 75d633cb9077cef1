package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/client"
)

func newClient(t testing.TB, base string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(base, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeAppendsAndReads: against a real serve, an append, its retry
// (same transaction id: the original sequence, Duplicate), the id with
// other content (409, errors.Is ErrInvalidState), a batch listing its
// duplicate, a generated transaction id, a scan and a per-execution read.
func TestServeAppendsAndReads(t *testing.T) {
	p := startServe(t, "--dir", t.TempDir())
	c := newClient(t, p.base, client.Options{})
	ctx := context.Background()

	first, err := c.Append(ctx, client.Event{ExecutionID: "order-1", TransactionID: "tx-1", Payload: `{"a":"<&>"}`})
	if err != nil || first.Sequence != 1 || first.Duplicate || !first.CreatedStream || first.Attempts != 1 {
		t.Fatalf("first append: %+v, %v", first, err)
	}
	again, err := c.Append(ctx, client.Event{ExecutionID: "order-1", TransactionID: "tx-1", Payload: `{"a":"<&>"}`})
	if err != nil || again.Sequence != 1 || !again.Duplicate {
		t.Fatalf("retry: %+v, %v (want sequence 1, duplicate)", again, err)
	}
	_, err = c.Append(ctx, client.Event{ExecutionID: "order-1", TransactionID: "tx-1", Payload: "other"})
	var e *client.Error
	if !errors.Is(err, bucketlog.ErrInvalidState) || !errors.As(err, &e) || e.Status != 409 || e.Class != bucketlog.ClassInvalidState {
		t.Fatalf("same id, other payload: %v (want 409 invalid_state)", err)
	}
	gen, err := c.Append(ctx, client.Event{ExecutionID: "order-2", Payload: "p2"})
	if err != nil || gen.TransactionID == "" || gen.Sequence != 2 {
		t.Fatalf("generated id: %+v, %v", gen, err)
	}
	batch, err := c.AppendBatch(ctx, []client.Event{
		{ExecutionID: "order-1", TransactionID: "tx-1", Payload: `{"a":"<&>"}`},
		{ExecutionID: "order-3", TransactionID: "tx-3", Payload: "p3"},
		{ExecutionID: "order-3", Payload: "p4"},
	})
	if err != nil || batch.Appended != 2 || batch.FirstSequence != 3 || batch.LastSequence != 4 ||
		len(batch.Duplicates) != 1 || batch.Duplicates[0] != (client.Duplicate{Index: 0, Sequence: 1}) || batch.TransactionIDs[2] == "" {
		t.Fatalf("batch: %+v, %v", batch, err)
	}
	page, err := c.Scan(ctx, client.ReadRequest{})
	if err != nil || page.Returned != 4 || len(page.Records) != 4 || page.RecordCount != 4 {
		t.Fatalf("scan: %+v, %v", page, err)
	}
	want := []string{"tx-1", gen.TransactionID, "tx-3", batch.TransactionIDs[2]}
	for i, r := range page.Records {
		if r.Sequence != uint64(i+1) || r.TransactionID != want[i] {
			t.Fatalf("record %d: %+v (want transaction id %s)", i, r, want[i])
		}
	}
	if page.Records[0].Payload != `{"a":"<&>"}` {
		t.Fatalf("payload altered: %q", page.Records[0].Payload)
	}
	after, err := c.Scan(ctx, client.ReadRequest{After: 2, Limit: 1})
	if err != nil || len(after.Records) != 1 || after.Records[0].Sequence != 3 {
		t.Fatalf("scan after 2 limit 1: %+v, %v", after, err)
	}
	ex, err := c.ReadExecution(ctx, "order-3", client.ReadRequest{})
	if err != nil || ex.ExecutionID != "order-3" || len(ex.Records) != 2 || ex.Records[1].Payload != "p4" || ex.ServedBy == "" {
		t.Fatalf("read execution: %+v, %v", ex, err)
	}
	_, err = c.Append(ctx, client.Event{ExecutionID: "", Payload: "x"})
	if !errors.Is(err, bucketlog.ErrInvalidInput) {
		t.Fatalf("empty execution id: %v (want invalid_input)", err)
	}
	_, err = c.Append(ctx, client.Event{ExecutionID: "order-1", Payload: "bad \xff"})
	if !errors.Is(err, bucketlog.ErrInvalidInput) {
		t.Fatalf("invalid UTF-8: %v (want invalid_input before sending)", err)
	}
}

// TestServeConsumers: pull (creating), ack, the listing, one consumer, and
// delete; an unknown consumer is ErrUnknownConsumer.
func TestServeConsumers(t *testing.T) {
	p := startServe(t, "--dir", t.TempDir())
	c := newClient(t, p.base, client.Options{})
	ctx := context.Background()
	for i := range 3 {
		if _, err := c.Append(ctx, client.Event{ExecutionID: "e", Payload: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := c.Pull(ctx, "billing", client.PullRequest{Limit: 2})
	if err != nil || !pr.CreatedConsumer || len(pr.Records) != 2 || pr.PendingCount != 3 {
		t.Fatalf("pull: %+v, %v", pr, err)
	}
	acked, err := c.Ack(ctx, "billing", pr.Records[1].Sequence)
	if err != nil || acked != 2 {
		t.Fatalf("ack: %d, %v", acked, err)
	}
	if acked, err := c.Ack(ctx, "billing", 2); err != nil || acked != 2 {
		t.Fatalf("ack again: %d, %v", acked, err)
	}
	list, err := c.Consumers(ctx)
	if err != nil || list.LogRecordCount != 3 || len(list.Consumers) != 1 ||
		list.Consumers[0] != (client.Consumer{Name: "billing", AckedSequence: 2, PendingCount: 1, HoldsGCBack: true}) {
		t.Fatalf("consumers: %+v, %v", list, err)
	}
	one, err := c.Consumer(ctx, "billing")
	if err != nil || one.AckedSequence != 2 {
		t.Fatalf("consumer: %+v, %v", one, err)
	}
	if _, err := c.Consumer(ctx, "nobody"); !errors.Is(err, bucketlog.ErrUnknownConsumer) || !errors.Is(err, bucketlog.ErrInvalidState) {
		t.Fatalf("unknown consumer: %v", err)
	}
	if err := c.DeleteConsumer(ctx, "billing"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteConsumer(ctx, "billing"); !errors.Is(err, bucketlog.ErrUnknownConsumer) {
		t.Fatalf("second delete: %v (want unknown consumer)", err)
	}
	if r, err := c.Ready(ctx); err != nil || !r.Ready {
		t.Fatalf("ready: %+v, %v", r, err)
	}
}

// TestServeNotOwner: an append or read of another shard's execution is a
// 421 reported with the owner shard, errors.Is ErrNotOwner, and
// bucketlog.OwnerShard and errors.As *affinity.NotOwnerError see it; it is
// not retried.
func TestServeNotOwner(t *testing.T) {
	p := startServe(t, "--dir", t.TempDir(), "--shard-index", "0", "--shard-count", "4")
	c := newClient(t, p.base, client.Options{})
	ctx := context.Background()
	own := affinity.Ownership{Index: 0, Count: 4}
	id := ""
	for i := 0; id == ""; i++ {
		if cand := fmt.Sprintf("exec-%d", i); own.OwnerOf(cand) != 0 {
			id = cand
		}
	}
	wantOwner := own.OwnerOf(id)
	res, err := c.Append(ctx, client.Event{ExecutionID: id, Payload: "x"})
	owner, ok := client.OwnerShard(err)
	if !ok || owner != wantOwner || !errors.Is(err, bucketlog.ErrNotOwner) || res.Attempts != 1 {
		t.Fatalf("append elsewhere: %v (owner %d %v, attempts %d; want owner %d, 1 attempt)", err, owner, ok, res.Attempts, wantOwner)
	}
	if o, ok := bucketlog.OwnerShard(err); !ok || o != wantOwner {
		t.Fatalf("bucketlog.OwnerShard: %d %v", o, ok)
	}
	var noe *affinity.NotOwnerError
	if !errors.As(err, &noe) || noe.Owner != wantOwner || noe.ExecutionID != id {
		t.Fatalf("errors.As NotOwnerError: %+v", noe)
	}
	if _, err := c.ReadExecution(ctx, id, client.ReadRequest{}); !errors.Is(err, bucketlog.ErrNotOwner) {
		t.Fatalf("read elsewhere: %v", err)
	}
}
