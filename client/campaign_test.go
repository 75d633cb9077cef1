package client_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/client"
)

// campaignAppends is the retry campaign's size: 1,000 in the default run,
// the 10,000 with -campaign.appends=10000.
var campaignAppends = flag.Int("campaign.appends", 1000, "appends of TestRetryCampaign")

// campaignControl is the size of the RED controls.
var campaignControl = flag.Int("campaign.control", 300, "appends of the campaign's RED controls")

// faultProxy stands in front of serve and injects failures by the count of
// requests (never by time): every dropEvery-th request is forwarded and
// its answer dropped (the connection closed instead); every holdEvery-th
// is forwarded and its answer held until the client gives up (the
// client's attempt timeout). While upstream is empty (serve killed, being
// restarted or restored) every request answers 502.
type faultProxy struct {
	upstream             atomic.Pointer[string]
	n                    atomic.Int64
	dropEvery, holdEvery int64
	dropped, held, bad   atomic.Int64
	accepted, dupAnswers atomic.Int64 // 202s, and answers "duplicate":true, from serve
	hc                   *http.Client
}

func (f *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.n.Add(1)
	up := f.upstream.Load()
	if up == nil || *up == "" {
		f.bad.Add(1)
		http.Error(w, "upstream down", http.StatusBadGateway)
		return
	}
	body, _ := io.ReadAll(r.Body)
	// The upstream request is not tied to the client's: it runs to its end
	// even when the client gives up (as a real proxy's would).
	req, err := http.NewRequestWithContext(context.Background(), r.Method, *up+r.URL.RequestURI(), strings.NewReader(string(body)))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := f.hc.Do(req)
	if err != nil {
		f.bad.Add(1)
		http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		f.bad.Add(1)
		http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	if resp.StatusCode == http.StatusAccepted {
		f.accepted.Add(1)
	}
	if strings.Contains(string(answer), `"duplicate":true`) {
		f.dupAnswers.Add(1)
	}
	switch {
	case r.Method == http.MethodPost && f.dropEvery > 0 && n%f.dropEvery == 0:
		f.dropped.Add(1)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	case r.Method == http.MethodPost && f.holdEvery > 0 && n%f.holdEvery == 0:
		f.held.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(hangGuard):
		}
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// campaignResult is what a campaign counted.
type campaignResult struct {
	appends, attempts, records                       int
	duplicates, lost, unacked                        int
	kills, diskLosses, bucketOutages                 int
	dropped, held, badGateway, status202, dupAnswers int64
}

func (r campaignResult) String() string {
	return fmt.Sprintf("appends=%d attempts=%d records=%d duplicates=%d lost=%d unacknowledged-written=%d | kills=%d disk-losses=%d bucket-outages=%d dropped-responses=%d client-timeouts=%d 502s=%d 202s=%d answered-duplicate=%d",
		r.appends, r.attempts, r.records, r.duplicates, r.lost, r.unacked, r.kills, r.diskLosses, r.bucketOutages, r.dropped, r.held, r.badGateway, r.status202, r.dupAnswers)
}

// runCampaign appends n events through the client (each call with no
// transaction id: the client generates it) by 8 workers, through a
// faultProxy, against a synchronous serve (an acknowledged append is in the
// bucket) that is SIGKILLed and restarted, and twice loses its disk and is
// restored from the bucket (hydrated by serve from an empty directory)
// while the retries wait at the proxy; the schedule follows the count of
// acknowledged appends. Then it scans the log and counts, by payload (each
// call's payload is unique), the events written more than once and those
// acknowledged and absent.
func runCampaign(t *testing.T, n int, window string, syncMode bool) campaignResult {
	fb := newFlakyBucket(t)
	bucket := fb.url
	dir := filepath.Join(t.TempDir(), "shard")
	args := []string{"--dir", dir, "--bucket", bucket, "--transaction-window", window}
	if syncMode {
		args = append(args, "--sync-to-bucket", "--sync-wait", "1s", "--tail-interval", "20ms")
	} else {
		args = append(args, "--tail-interval", "1h") // nothing ships: a lost disk loses what it acknowledged
	}
	proxy := &faultProxy{dropEvery: 11, holdEvery: 37, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	ps := httptest.NewServer(proxy)
	defer ps.Close()
	srv := startServe(t, args...)
	proxy.upstream.Store(&srv.base)

	c := newClient(t, ps.URL, client.Options{
		HTTPClient:     &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		AttemptTimeout: 3 * time.Second,
		Retry:          client.Retry{MaxAttempts: -1, InitialDelay: 5 * time.Millisecond, MaxDelay: 300 * time.Millisecond},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a hang guard only
	defer cancel()

	var res campaignResult
	res.appends = n
	acked := make([]bool, n)
	var next, done, attempts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				r, err := c.Append(ctx, client.Event{ExecutionID: fmt.Sprintf("exec-%d", i%16), Payload: "campaign-" + strconv.Itoa(i)})
				attempts.Add(int64(r.Attempts))
				if err != nil {
					errs <- fmt.Errorf("append %d: %w", i, err)
					return
				}
				acked[i] = true
				done.Add(1)
			}
		}()
	}
	// The failure schedule, by progress: at each fifth of the appends,
	// a SIGKILL and restart, or a SIGKILL, the disk lost and the shard
	// restored from the bucket, with the proxy answering 502 meanwhile;
	// in the synchronous runs, halfway to each, the bucket goes away
	// until serve has answered 202 (not in the bucket) 8 more times.
	waitFor := func(cond func() bool) {
		for !cond() {
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	for k := 1; k <= 4; k++ {
		if syncMode {
			waitFor(func() bool { return done.Load() >= int64(k*n/5-n/10) })
			seen := proxy.accepted.Load()
			fb.down.Store(true)
			waitFor(func() bool { return proxy.accepted.Load() >= seen+8 })
			fb.down.Store(false)
			res.bucketOutages++
		}
		waitFor(func() bool { return done.Load() >= int64(k*n/5) })
		proxy.upstream.Store(nil)
		srv.kill()
		res.kills++
		if k%2 == 0 {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			res.diskLosses++
		}
		srv = startServe(t, args...)
		proxy.upstream.Store(&srv.base)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res.attempts = int(attempts.Load())
	res.dropped, res.held, res.badGateway = proxy.dropped.Load(), proxy.held.Load(), proxy.bad.Load()
	res.status202, res.dupAnswers = proxy.accepted.Load(), proxy.dupAnswers.Load()

	// Read everything back directly (no proxy).
	direct := newClient(t, srv.base, client.Options{})
	count := make(map[string]int)
	after := uint64(0)
	for {
		p, err := direct.Scan(ctx, client.ReadRequest{After: after, Limit: 5000})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) == 0 {
			break
		}
		for _, r := range p.Records {
			count[r.Payload]++
			res.records++
			after = r.Sequence
		}
	}
	for i := range n {
		switch c := count["campaign-"+strconv.Itoa(i)]; {
		case c == 0 && acked[i]:
			res.lost++
		case c == 0:
		case c > 1:
			res.duplicates += c - 1
		}
		if !acked[i] && count["campaign-"+strconv.Itoa(i)] > 0 {
			res.unacked++
		}
	}
	if res.kills != 4 || res.diskLosses != 2 || res.dropped == 0 || res.held == 0 || (syncMode && res.status202 == 0) {
		t.Fatalf("the campaign did not inject every failure: %v", res)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the campaign hit its hang guard")
	}
	return res
}

// TestRetryCampaign is the retry campaign: appends through the
// client with dropped responses, client timeouts, SIGKILLs and lost disks
// restored from the bucket; every acknowledged append is in the log
// exactly once.
func TestRetryCampaign(t *testing.T) {
	res := runCampaign(t, *campaignAppends, "0", true)
	t.Logf("retry campaign (dedup on): %v", res)
	if res.duplicates != 0 || res.lost != 0 || res.records != res.appends {
		t.Fatalf("retry campaign: %v (want 0 duplicates, 0 lost, %d records)", res, res.appends)
	}
}

// TestRetryCampaignRedControl is the campaign's RED control: with the
// transaction window off (--transaction-window -1) the same failures
// write retried events again, and the count sees them.
func TestRetryCampaignRedControl(t *testing.T) {
	n := *campaignControl
	res := runCampaign(t, n, "-1", true)
	t.Logf("retry campaign RED control (dedup off): %v", res)
	if res.duplicates == 0 {
		t.Fatalf("RED control: %v (want duplicates > 0 with dedup off)", res)
	}
}

// TestRetryCampaignLostControl is the RED control of the lost count: an
// asynchronous serve whose tail never ships acknowledges appends that a
// lost disk takes with it, and the count sees them.
func TestRetryCampaignLostControl(t *testing.T) {
	n := *campaignControl
	res := runCampaign(t, n, "0", false)
	t.Logf("retry campaign lost control (asynchronous, nothing shipped): %v", res)
	if res.lost == 0 {
		t.Fatalf("lost control: %v (want lost > 0: acknowledged appends were only on the lost disk)", res)
	}
}
