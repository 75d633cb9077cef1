package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/client"
)

// scripted is an httptest server answering the n-th request with
// answers[n] (the last one repeats); "drop" closes the connection without
// an answer, "hold" waits for the client to give up. It records the bodies.
type scripted struct {
	mu      sync.Mutex
	bodies  []string
	answers []answer
}

type answer struct {
	status int
	body   string
	drop   bool
	hold   bool
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	a := s.answers[min(len(s.bodies), len(s.answers))-1]
	s.mu.Unlock()
	switch {
	case a.drop:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	case a.hold:
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (s *scripted) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

func scriptedClient(t *testing.T, opts client.Options, answers ...answer) (*client.Client, *scripted) {
	t.Helper()
	s := &scripted{answers: answers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if opts.Retry.InitialDelay == 0 {
		opts.Retry.InitialDelay, opts.Retry.MaxDelay = time.Millisecond, 5*time.Millisecond
	}
	return newClient(t, srv.URL, opts), s
}

const okAppend = `{"action":"eventlog-append","execution_id":"e","global_sequence":7,"byte_len":1,"created_stream":false,"log_record_count":9,"duplicate":true}`

// TestAppendRetriesWithTheSameTransactionID: a lost answer, a client
// timeout, 502, 503, 504 and a 202 not_in_bucket are each retried, and
// every attempt sends the same body, with the transaction id generated
// once before the first.
func TestAppendRetriesWithTheSameTransactionID(t *testing.T) {
	// The held answer costs one attempt timeout; every other answer is
	// local and immediate.
	c, s := scriptedClient(t, client.Options{AttemptTimeout: 2 * time.Second},
		answer{drop: true},
		answer{hold: true},
		answer{status: 502, body: "bad gateway"},
		answer{status: 503, body: `{"error":"busy","class":"storage"}`},
		answer{status: 504},
		answer{status: 202, body: `{"action":"eventlog-append","global_sequence":7,"error":"not yet","class":"not_in_bucket"}`},
		answer{status: 200, body: okAppend})
	res, err := c.Append(context.Background(), client.Event{ExecutionID: "e", Payload: "p"})
	if err != nil || res.Sequence != 7 || !res.Duplicate || res.Attempts != 7 || res.TransactionID == "" {
		t.Fatalf("append: %+v, %v (want sequence 7, duplicate, 7 attempts)", res, err)
	}
	bodies := s.seen()
	if len(bodies) != 7 {
		t.Fatalf("%d requests, want 7", len(bodies))
	}
	for i, b := range bodies {
		if b != bodies[0] || !strings.Contains(b, `"transaction_id":"`+res.TransactionID+`"`) {
			t.Fatalf("attempt %d sent %s, the first %s (want the same body with transaction id %s)", i+1, b, bodies[0], res.TransactionID)
		}
	}
}

// TestBatchRetriesWithTheSameTransactionIDs: a batch's generated ids are
// made once; the retry sends the same body.
func TestBatchRetriesWithTheSameTransactionIDs(t *testing.T) {
	c, s := scriptedClient(t, client.Options{}, answer{drop: true},
		answer{status: 200, body: `{"appended":0,"first_sequence":0,"last_sequence":0,"duplicates":[{"index":0,"global_sequence":1},{"index":1,"global_sequence":2}]}`})
	res, err := c.AppendBatch(context.Background(), []client.Event{{ExecutionID: "e", Payload: "a"}, {ExecutionID: "e", TransactionID: "mine", Payload: "b"}})
	if err != nil || len(res.Duplicates) != 2 || res.Attempts != 2 || res.TransactionIDs[1] != "mine" || res.TransactionIDs[0] == "" {
		t.Fatalf("batch: %+v, %v", res, err)
	}
	if b := s.seen(); b[0] != b[1] {
		t.Fatalf("the retry sent %s, the first %s", b[1], b[0])
	}
}

// TestRefusalsAreNotRetried: 400, 404, 409, 413 and 421 are final, each
// errors.Is its class's sentinels.
func TestRefusalsAreNotRetried(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		is     []error
	}{
		{400, `{"error":"bad","class":"invalid_input"}`, []error{bucketlog.ErrInvalidInput}},
		{400, `{"error":"bad flag","class":"usage"}`, []error{bucketlog.ErrUsage}},
		{404, `{"error":"no such","class":"invalid_state"}`, []error{bucketlog.ErrInvalidState, bucketlog.ErrUnknownConsumer}},
		{409, `{"error":"held by 3","class":"invalid_state"}`, []error{bucketlog.ErrInvalidState}},
		{413, `{"error":"big","class":"invalid_input"}`, []error{bucketlog.ErrInvalidInput, bucketlog.ErrTooLarge}},
		{421, `{"error":"elsewhere","class":"not_owner","owner_shard":2}`, []error{bucketlog.ErrNotOwner}},
	} {
		c, s := scriptedClient(t, client.Options{}, answer{status: tc.status, body: tc.body})
		res, err := c.Append(context.Background(), client.Event{ExecutionID: "e", Payload: "p"})
		if res.Attempts != 1 || len(s.seen()) != 1 {
			t.Errorf("%d %s: %d attempts, want 1", tc.status, tc.body, res.Attempts)
		}
		for _, want := range tc.is {
			if !errors.Is(err, want) {
				t.Errorf("%d %s: %v is not %v", tc.status, tc.body, err, want)
			}
		}
		if errors.Is(err, bucketlog.ErrNotOwner) != (tc.status == 421) || errors.Is(err, client.ErrStorage) {
			t.Errorf("%d: %v has the wrong classes", tc.status, err)
		}
		if owner, ok := client.OwnerShard(err); ok != (tc.status == 421) || (ok && owner != 2) {
			t.Errorf("%d: OwnerShard %d %v", tc.status, owner, ok)
		}
	}
}

// TestRetriesRunOut: MaxAttempts bounds the attempts; the last failure is
// returned with its class (storage, or unavailable for an unclassed 502
// and for no answer at all); a final 202 returns the outcome too.
func TestRetriesRunOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    answer
		is   error
	}{
		{"503 storage", answer{status: 503, body: `{"error":"poisoned","class":"storage"}`}, client.ErrStorage},
		{"502 unclassed", answer{status: 502, body: "bad gateway"}, client.ErrUnavailable},
		{"no answer", answer{drop: true}, client.ErrUnavailable},
		{"202", answer{status: 202, body: `{"global_sequence":4,"error":"not yet","class":"not_in_bucket"}`}, bucketlog.ErrNotInBucket},
	} {
		c, s := scriptedClient(t, client.Options{Retry: client.Retry{MaxAttempts: 3}}, tc.a)
		res, err := c.Append(context.Background(), client.Event{ExecutionID: "e", TransactionID: "t", Payload: "p"})
		if !errors.Is(err, tc.is) || res.Attempts != 3 || len(s.seen()) != 3 || res.TransactionID != "t" {
			t.Errorf("%s: %+v, %v (want 3 attempts, errors.Is %v)", tc.name, res, err, tc.is)
		}
		if tc.name == "202" && res.Sequence != 4 {
			t.Errorf("a final 202 lost its outcome: %+v", res)
		}
	}
}

// TestRetryStopsWithTheContext: a cancelled context ends the retries at
// once (the backoff waits on it) with the context's error.
func TestRetryStopsWithTheContext(t *testing.T) {
	c, _ := scriptedClient(t, client.Options{Retry: client.Retry{MaxAttempts: -1, InitialDelay: time.Hour, MaxDelay: time.Hour}},
		answer{status: 503, body: `{"error":"x","class":"storage"}`})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err := c.Append(ctx, client.Event{ExecutionID: "e", Payload: "p"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("append: %v (want context.Canceled)", err)
	}
}

// TestDeleteAfterALostAnswer: a delete whose first answer was lost and
// whose retry finds no consumer is done; a first 404 is not.
func TestDeleteAfterALostAnswer(t *testing.T) {
	c, _ := scriptedClient(t, client.Options{}, answer{drop: true}, answer{status: 404, body: `{"error":"unknown consumer","class":"invalid_state"}`})
	if err := c.DeleteConsumer(context.Background(), "x"); err != nil {
		t.Fatalf("delete after a lost answer: %v", err)
	}
	c, _ = scriptedClient(t, client.Options{}, answer{status: 404, body: `{"error":"unknown consumer","class":"invalid_state"}`})
	if err := c.DeleteConsumer(context.Background(), "x"); !errors.Is(err, bucketlog.ErrUnknownConsumer) {
		t.Fatalf("delete of an unknown consumer: %v", err)
	}
}
