package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bucketlog/bucketlog"
)

// PullRequest pages a pull.
type PullRequest struct {
	// Limit caps the records (0: the server's default, 1000).
	Limit int
	// Wait, when positive, long-polls for a record past the cursor.
	Wait time.Duration
}

// PullResult is the outcome of Pull.
type PullResult struct {
	Consumer        string   `json:"consumer"`
	Exists          bool     `json:"exists"`
	CreatedConsumer bool     `json:"created_consumer"`
	AckedSequence   uint64   `json:"acked_sequence"`
	PendingCount    uint64   `json:"pending_count"`
	Returned        int      `json:"returned"`
	Records         []Record `json:"records"`
	Truncated       bool     `json:"truncated"`
	NextAfter       uint64   `json:"next_after"`
}

func consumerPath(name string) string { return "/v1/consumers/" + url.PathEscape(name) }

// Pull reads the records past a durable consumer's cursor, creating the
// consumer on its first pull (CreatedConsumer). A pull does not move the
// cursor (Ack does), so it is retried like a read.
func (c *Client) Pull(ctx context.Context, consumer string, r PullRequest) (PullResult, error) {
	q := url.Values{}
	if r.Limit > 0 {
		q.Set("limit", strconv.Itoa(r.Limit))
	}
	if r.Wait > 0 {
		q.Set("wait", r.Wait.String())
	}
	var p PullResult
	_, err := c.call(ctx, request{method: http.MethodPost, path: consumerPath(consumer) + "/pull", query: q, ok: []int{http.StatusOK}, wait: r.Wait}, &p)
	return p, err
}

// Ack moves a consumer's cursor to sequence and returns the acked
// sequence. Acking the same sequence again is answered the same, so it is
// retried.
func (c *Client) Ack(ctx context.Context, consumer string, sequence uint64) (uint64, error) {
	body, _ := json.Marshal(map[string]uint64{"sequence": sequence})
	var out struct {
		Acked uint64 `json:"acked_sequence"`
	}
	_, err := c.call(ctx, request{method: http.MethodPost, path: consumerPath(consumer) + "/ack", body: body, ok: []int{http.StatusOK}}, &out)
	return out.Acked, err
}

// DeleteConsumer deletes a durable consumer (it stops holding GC back). An
// unknown consumer is errors.Is bucketlog.ErrUnknownConsumer, unless an
// earlier attempt of this call got no answer: that attempt deleted it.
func (c *Client) DeleteConsumer(ctx context.Context, consumer string) error {
	o, err := c.call(ctx, request{method: http.MethodDelete, path: consumerPath(consumer), ok: []int{http.StatusNoContent}}, nil)
	if err != nil && o.lost && errors.Is(err, bucketlog.ErrUnknownConsumer) {
		return nil
	}
	return err
}

// Consumer is one durable consumer.
type Consumer struct {
	Name          string `json:"consumer"`
	AckedSequence uint64 `json:"acked_sequence"`
	PendingCount  uint64 `json:"pending_count"`
	// HoldsGCBack: its cursor is the lowest and below the tip, so
	// consumer-interest GC cannot reclaim past it.
	HoldsGCBack bool `json:"holds_gc_back"`
}

// Consumers is the listing of a shard's consumers, sorted by name.
type Consumers struct {
	LogRecordCount uint64     `json:"log_record_count"`
	Base           uint64     `json:"base"`
	Consumers      []Consumer `json:"consumers"`
}

// Consumers lists the shard's consumers.
func (c *Client) Consumers(ctx context.Context) (Consumers, error) {
	var out Consumers
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/v1/consumers", ok: []int{http.StatusOK}}, &out)
	return out, err
}

// Consumer returns one consumer (an unknown one is errors.Is
// bucketlog.ErrUnknownConsumer; it is not created).
func (c *Client) Consumer(ctx context.Context, name string) (Consumer, error) {
	var out Consumer
	_, err := c.call(ctx, request{method: http.MethodGet, path: consumerPath(name), ok: []int{http.StatusOK}}, &out)
	return out, err
}
