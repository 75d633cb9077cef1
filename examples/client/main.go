// Command client is a small producer and consumer of a running
// `bucketlog serve`, through the Go client (package client):
//
//	bucketlog serve --dir /tmp/shard &      # listens on 127.0.0.1:7480
//	go run ./examples/client -addr http://127.0.0.1:7480
//
// It appends an order's events (one of them twice with the same
// transaction id, as a producer retrying after a lost answer would: the
// second is answered "duplicate" with the original sequence, not written
// again), pulls them as the durable consumer "shipping", acks them and
// prints the consumers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bucketlog/bucketlog/client"
)

func main() {
	addr := flag.String("addr", "http://127.0.0.1:7480", "the serve address")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *addr, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr string, out io.Writer) error {
	c, err := client.New(addr, client.Options{AttemptTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	for _, step := range []string{"created", "paid", "packed"} {
		// No transaction id: the client makes one, once, and every retry
		// of this call sends it.
		res, err := c.Append(ctx, client.Event{ExecutionID: "order-42", Payload: `{"step":"` + step + `"}`})
		if err != nil {
			return fmt.Errorf("append %s: %w", step, err)
		}
		fmt.Fprintf(out, "appended %s at sequence %d (%d attempt(s))\n", step, res.Sequence, res.Attempts)
	}
	// A retry of our own, with the id the first call used.
	ev := client.Event{ExecutionID: "order-42", TransactionID: "order-42-shipped", Payload: `{"step":"shipped"}`}
	first, err := c.Append(ctx, ev)
	if err != nil {
		return err
	}
	again, err := c.Append(ctx, ev)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "shipped at sequence %d; the retry: sequence %d, duplicate %v\n", first.Sequence, again.Sequence, again.Duplicate)

	page, err := c.Pull(ctx, "shipping", client.PullRequest{Limit: 100})
	if err != nil {
		return err
	}
	for _, r := range page.Records {
		fmt.Fprintf(out, "consumer shipping read %d %s %s\n", r.Sequence, r.ExecutionID, r.Payload)
	}
	if n := len(page.Records); n > 0 {
		if _, err := c.Ack(ctx, "shipping", page.Records[n-1].Sequence); err != nil {
			return err
		}
	}
	list, err := c.Consumers(ctx)
	if err != nil {
		return err
	}
	for _, cs := range list.Consumers {
		fmt.Fprintf(out, "consumer %s acked %d, %d pending\n", cs.Name, cs.AckedSequence, cs.PendingCount)
	}
	return nil
}
