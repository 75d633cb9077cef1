package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/bucketlog/bucketlog"
)

// Default options (Options).
const (
	DefaultAttemptTimeout = 30 * time.Second
	DefaultMaxAttempts    = 10
	DefaultInitialDelay   = 50 * time.Millisecond
	DefaultMaxDelay       = 5 * time.Second
	// maxAnswer bounds an answer read into memory: a page is capped by the
	// server's --max-page-bytes (8 MiB by default) plus its JSON framing.
	maxAnswer = 256 << 20
)

// Options configure New. The zero value works: the defaults above, and
// http.DefaultTransport.
type Options struct {
	// HTTPClient sends the requests (its Timeout should be zero or above
	// AttemptTimeout plus the longest Wait).
	HTTPClient *http.Client
	// AttemptTimeout bounds one attempt (a long poll's attempt gets its
	// Wait on top).
	AttemptTimeout time.Duration
	Retry          Retry
	// NewTransactionID makes the transaction id of an event given none
	// (default: 16 random bytes, hex). It is called once per event per
	// call, before the first attempt.
	NewTransactionID func() string
}

// Retry is the backoff of transient failures (doc.go, Retries).
type Retry struct {
	// MaxAttempts counts the first attempt (default 10; negative: retry
	// until the context ends).
	MaxAttempts int
	// InitialDelay is the bound of the first delay, doubled each retry up
	// to MaxDelay; each delay is drawn uniformly below its bound.
	InitialDelay, MaxDelay time.Duration
}

// Client talks to one `bucketlog serve`. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	hc    *http.Client
	opts  Options
	retry Retry
}

// New returns a client of the server at baseURL ("http://HOST:PORT").
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q is not http(s)://HOST[:PORT]", baseURL)
	}
	c := &Client{base: u, hc: opts.HTTPClient, opts: opts, retry: opts.Retry}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.opts.AttemptTimeout <= 0 {
		c.opts.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.opts.NewTransactionID == nil {
		c.opts.NewTransactionID = randomID
	}
	if c.retry.MaxAttempts == 0 {
		c.retry.MaxAttempts = DefaultMaxAttempts
	}
	if c.retry.InitialDelay <= 0 {
		c.retry.InitialDelay = DefaultInitialDelay
	}
	if c.retry.MaxDelay <= 0 {
		c.retry.MaxDelay = DefaultMaxDelay
	}
	c.retry.MaxDelay = max(c.retry.MaxDelay, c.retry.InitialDelay)
	return c, nil
}

func randomID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// request is one call of the API.
type request struct {
	method, path string
	query        url.Values
	body         []byte
	// ok are the success statuses; the answer is decoded into out.
	ok []int
	// wait is the long poll's wait, added to the attempt's timeout.
	wait time.Duration
	// retryNotInBucket retries a 202 not_in_bucket (appends); out is
	// decoded from it too, so a final 202 still returns the outcome.
	retryNotInBucket bool
	executionID      string
}

// outcome is what call learnt: the status of the final answer (0 when there
// was none) and how many attempts it took.
type outcome struct {
	status, attempts int
	// lost is true when some attempt got no answer (it may have acted).
	lost bool
}

// call runs rq with retries (doc.go, Retries), decoding a success into out.
func (c *Client) call(ctx context.Context, rq request, out any) (outcome, error) {
	var o outcome
	var last error
	for {
		o.attempts++
		status, retryAfter, err := c.attempt(ctx, rq, out)
		o.status = status
		if err == nil {
			return o, nil
		}
		if ctx.Err() != nil {
			return o, fmt.Errorf("%w (after %d attempts; last: %v)", ctx.Err(), o.attempts, err)
		}
		if !transient(rq, status, err) {
			return o, err
		}
		o.lost = o.lost || status == 0
		last = err
		if c.retry.MaxAttempts > 0 && o.attempts >= c.retry.MaxAttempts {
			return o, fmt.Errorf("after %d attempts: %w", o.attempts, last)
		}
		d := backoff(c.retry, o.attempts)
		if retryAfter > d {
			d = min(retryAfter, c.retry.MaxDelay)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return o, fmt.Errorf("%w (after %d attempts; last: %v)", ctx.Err(), o.attempts, last)
		case <-t.C:
		}
	}
}

// transient reports whether a failed attempt is retried.
func transient(rq request, status int, err error) bool {
	switch status {
	case 0:
		return true // no answer
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusAccepted:
		return rq.retryNotInBucket && errors.Is(err, bucketlog.ErrNotInBucket)
	}
	return false
}

// attempt sends rq once. status is 0 when no answer arrived.
func (c *Client) attempt(ctx context.Context, rq request, out any) (status int, retryAfter time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.AttemptTimeout+rq.wait)
	defer cancel()
	u := c.base.String() + rq.path // rq.path is escaped already
	if len(rq.query) > 0 {
		u += "?" + rq.query.Encode()
	}
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(actx, rq.method, u, body)
	if err != nil {
		return 0, 0, fmt.Errorf("client: %w", err)
	}
	if rq.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s %s: %v", ErrUnavailable, rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s %s: read the answer: %v", ErrUnavailable, rq.method, rq.path, err)
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		var n int
		if _, perr := fmt.Sscanf(s, "%d", &n); perr == nil && n > 0 {
			retryAfter = time.Duration(n) * time.Second
		}
	}
	status = resp.StatusCode
	if slices.Contains(rq.ok, status) {
		if out != nil && len(data) > 0 {
			if err := json.Unmarshal(data, out); err != nil {
				return status, 0, fmt.Errorf("client: %s %s: decode the %d answer: %v", rq.method, rq.path, status, err)
			}
		}
		return status, 0, nil
	}
	e := &Error{Status: status, ExecutionID: rq.executionID}
	var eb errorBody
	if json.Unmarshal(data, &eb) == nil {
		e.Class, e.Message = eb.Class, eb.Error
		eb.owner(e)
	} else {
		e.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	if status == http.StatusAccepted && rq.retryNotInBucket && out != nil {
		_ = json.Unmarshal(data, out) // the outcome beside the error
	}
	return status, retryAfter, e
}

// backoff is the delay before retry n (n ≥ 1): uniform in [0, bound), the
// bound doubling from InitialDelay up to MaxDelay.
func backoff(r Retry, n int) time.Duration {
	bound := r.InitialDelay
	for i := 1; i < n && bound < r.MaxDelay; i++ {
		bound *= 2
	}
	bound = min(bound, r.MaxDelay)
	return time.Duration(rand.Int64N(int64(bound))) + 1
}

// Ready is /readyz's answer.
type Ready struct {
	Ready  bool   `json:"ready"`
	Shard  int    `json:"shard"`
	Reason string `json:"reason,omitempty"`
}

// Ready asks /readyz once (no retry): a 503 is an answer here, not an
// error.
func (c *Client) Ready(ctx context.Context) (Ready, error) {
	var r Ready
	_, _, err := c.attempt(ctx, request{method: http.MethodGet, path: "/readyz", ok: []int{200, 503}}, &r)
	return r, err
}
