package buckets

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

// DelayTransport is an http.RoundTripper that waits Delay before every
// request it forwards, so a request to the in-process emulator costs what a
// round trip to a real bucket does (20 ms is S3 in-region), and counts the
// HTTP requests by method (LIST apart from GET: what a provider bills: a multipart upload is
// several requests, a listing one per page). It is safe for concurrent use.
type DelayTransport struct {
	Delay time.Duration
	Base  http.RoundTripper

	mu       sync.Mutex
	byMethod map[string]int64
}

// RoundTrip waits Delay (or until the request's context ends), then
// forwards req to Base.
func (t *DelayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if t.byMethod == nil {
		t.byMethod = map[string]int64{}
	}
	t.byMethod[billedAs(req)]++
	t.mu.Unlock()
	if t.Delay > 0 {
		timer := time.NewTimer(t.Delay)
		select {
		case <-req.Context().Done():
			timer.Stop()
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, req.Context().Err()
		case <-timer.C:
		}
	}
	return t.Base.RoundTrip(req)
}

// billedAs names req the way a price list does: its method, except that a
// GET of a bucket listing (S3's ListObjectsV2: list-type in the query) is
// "LIST", billed with the writes.
func billedAs(req *http.Request) string {
	if req.Method == http.MethodGet && req.URL.Query().Has("list-type") {
		return "LIST"
	}
	return req.Method
}

// Methods returns a copy of the HTTP requests counted so far by method.
func (t *DelayTransport) Methods() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.byMethod))
	for k, v := range t.byMethod {
		out[k] = v
	}
	return out
}

// OpenDelayed opens bucket name through blobtier (as Open does) with an
// HTTP client of its own whose every request waits delay first. It returns
// the transport, for its request counts; close the bucket when done.
func (e *Emulator) OpenDelayed(ctx context.Context, name string, delay time.Duration) (blobtier.Bucket, *DelayTransport, error) {
	tr := &DelayTransport{Delay: delay, Base: http.DefaultTransport.(*http.Transport).Clone()}
	raw, err := emulator.OpenS3Bucket(ctx, e.s3.Endpoint(), name, &http.Client{Transport: tr})
	if err != nil {
		return nil, nil, err
	}
	return blobtier.New(raw, blobtier.Options{}), tr, nil
}
