package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

// pageAnswer is what the limits tests read of a page.
type pageAnswer struct {
	Returned    int      `json:"returned"`
	RecordCount uint64   `json:"record_count"`
	Records     []record `json:"records"`
	Truncated   bool     `json:"truncated"`
	NextAfter   uint64   `json:"next_after"`
	Acked       uint64   `json:"acked_sequence"`
}

func getPage(t *testing.T, h http.Handler, method, target string) pageAnswer {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, target, rec.Code, rec.Body.String())
	}
	var p pageAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServePageCappedByBytes: a page whose records pass the byte cap is cut
// after the last record that fits (always at least one record, however
// large), says so ("truncated", "next_after"), and the client continues
// from next_after until it has every record exactly once, in order. The
// same holds for per-execution reads and for pulls (ack next_after, pull
// again). This is the structural bound on an answer's memory: a page holds
// at most the cap plus one record, whatever limit asks for.
func TestServePageCappedByBytes(t *testing.T) {
	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), SegmentMaxBytes: localseg.MaxSegmentBytes, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner, segMax: localseg.MaxSegmentBytes})
	a.setLog(l)
	const mib = 1 << 20
	// 20 events of 1 MiB, one of 10 MiB (over the cap alone), 5 more.
	sizes := []int{}
	for range 20 {
		sizes = append(sizes, mib)
	}
	sizes = append(sizes, 10*mib)
	for range 5 {
		sizes = append(sizes, mib)
	}
	for i, n := range sizes {
		if _, err := l.Append(ctx, localseg.Event{ExecutionID: "1", TransactionID: fmt.Sprint("t", i), Payload: strings.Repeat(string(rune('a'+i%26)), n)}); err != nil {
			t.Fatal(err)
		}
	}
	pageCap := int64(defaultMaxPageBytes)

	check := func(what string, next func(after uint64) pageAnswer) {
		t.Helper()
		var after uint64
		pages, cut := 0, 0
		for {
			p := next(after)
			pages++
			if p.Returned != len(p.Records) {
				t.Fatalf("%s: returned %d, %d records", what, p.Returned, len(p.Records))
			}
			if len(p.Records) == 0 {
				if p.Truncated {
					t.Fatalf("%s: an empty page says truncated", what)
				}
				break
			}
			var bytes int64
			for i, r := range p.Records {
				if r.GlobalSequence != after+uint64(i)+1 || r.ByteLen != sizes[r.GlobalSequence-1] || len(r.Payload) != r.ByteLen {
					t.Fatalf("%s: page after %d, record %d: seq %d len %d", what, after, i, r.GlobalSequence, r.ByteLen)
				}
				bytes += int64(r.ByteLen)
			}
			last := p.Records[len(p.Records)-1]
			if len(p.Records) > 1 && bytes-int64(last.ByteLen) > pageCap {
				t.Fatalf("%s: a page of %d records holds %d bytes, over the cap of %d before its last record", what, len(p.Records), bytes, pageCap)
			}
			if len(p.Records) > 1 && bytes > pageCap+int64(mib) {
				t.Fatalf("%s: a page of %d records holds %d bytes (cap %d)", what, len(p.Records), bytes, pageCap)
			}
			more := last.GlobalSequence < uint64(len(sizes))
			if p.Truncated != more {
				t.Fatalf("%s: page ending at %d: truncated=%v", what, last.GlobalSequence, p.Truncated)
			}
			if p.Truncated {
				cut++
				if p.NextAfter != last.GlobalSequence {
					t.Fatalf("%s: next_after %d, last record %d", what, p.NextAfter, last.GlobalSequence)
				}
			}
			after = last.GlobalSequence
			if after == uint64(len(sizes)) {
				break
			}
		}
		if after != uint64(len(sizes)) || cut < 3 {
			t.Fatalf("%s: read through %d in %d pages (%d cut)", what, after, pages, cut)
		}
	}
	check("scan", func(after uint64) pageAnswer {
		return getPage(t, a, "GET", fmt.Sprintf("/v1/events?after=%d&limit=100000", after))
	})
	check("read", func(after uint64) pageAnswer {
		return getPage(t, a, "GET", fmt.Sprintf("/v1/executions/1/events?after=%d&limit=100000", after))
	})
	check("pull", func(after uint64) pageAnswer {
		if after > 0 {
			if code, out := call(t, a, "POST", "/v1/consumers/c/ack", fmt.Sprintf(`{"sequence":%d}`, after)); code != 200 {
				t.Fatalf("ack: %d %v", code, out)
			}
		}
		p := getPage(t, a, "POST", "/v1/consumers/c/pull?limit=100000")
		if p.Acked != after {
			t.Fatalf("pull after ack %d: acked %d", after, p.Acked)
		}
		return p
	})
	// The count limit still applies, and a page cut by count alone is not
	// "truncated".
	if p := getPage(t, a, "GET", "/v1/events?after=0&limit=2"); len(p.Records) != 2 || p.Truncated || p.NextAfter != 0 {
		t.Fatalf("limit=2: %d records truncated=%v next_after=%d", len(p.Records), p.Truncated, p.NextAfter)
	}
}

// blockedBody is a request body that sends nothing until released.
type blockedBody struct {
	release chan struct{}
}

func (b *blockedBody) Read(p []byte) (int, error) {
	<-b.release
	return 0, io.ErrUnexpectedEOF
}

// TestServeBodiesInFlightBounded: request bodies in flight across the
// server are bounded in bytes. Bodies that would pass the budget are
// refused at once with 503 and Retry-After, before a byte of them is read
// (not buffered, not queued); once the held bodies finish, the budget is
// whole again and a request is served.
func TestServeBodiesInFlightBounded(t *testing.T) {
	ctx := context.Background()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)
	srv := httptest.NewServer(a)
	defer srv.Close()

	const bodyLen = defaultMaxBody // each declares the largest body allowed
	held := int(defaultMaxInflightBodyBytes / bodyLen)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before srv.Close, which waits for the held handlers
	type answer struct {
		code  int
		retry string
		class string
		err   error
	}
	answers := make(chan answer, held+8)
	send := func() {
		req, err := http.NewRequest("POST", srv.URL+"/v1/events", &blockedBody{release: release})
		if err != nil {
			answers <- answer{err: err}
			return
		}
		req.ContentLength = bodyLen
		resp, err := srv.Client().Do(req)
		if err != nil {
			answers <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		answers <- answer{code: resp.StatusCode, retry: resp.Header.Get("Retry-After"), class: fmt.Sprint(out["class"])}
	}
	for range held {
		go send()
	}
	// The held bodies take the whole budget; wait until they do.
	deadline := time.Now().Add(20 * time.Second)
	for a.inflight.Load() < int64(held)*bodyLen {
		if time.Now().After(deadline) {
			t.Fatalf("the held bodies never reserved the budget: %d", a.inflight.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	const extra = 5
	for range extra {
		go send()
	}
	for range extra {
		select {
		case ans := <-answers:
			if ans.err != nil || ans.code != http.StatusServiceUnavailable || ans.retry == "" || ans.class != bucketlog.ClassStorage {
				t.Fatalf("a body over the in-flight budget: %+v", ans)
			}
		case <-time.After(hangGuard):
			t.Fatal("a body over the in-flight budget was not refused at once")
		}
	}
	free()
	for range held {
		<-answers
	}
	// A handler gives its reservation back as it returns, just after its
	// answer is written.
	for deadline := time.Now().Add(20 * time.Second); a.inflight.Load() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("in-flight bytes after every request finished: %d", a.inflight.Load())
		}
	}
	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t", "p")); code != http.StatusCreated {
		t.Fatalf("append once the budget is free: %d %v", code, out)
	}
}

func TestServeLimitFlagsUsage(t *testing.T) {
	for name, args := range map[string][]string{
		"zero page cap":                 {"--max-page-bytes", "0"},
		"in-flight budget under a body": {"--max-body-bytes", "1048576", "--max-inflight-body-bytes", "1048575"},
	} {
		t.Run(name, func(t *testing.T) {
			runCLI(t, nil, append([]string{"serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0"}, args...)...).want(t, 2, "usage")
		})
	}
}

// A store that ships to one bucket, served or shipped with another: exit 2
// naming both, nothing written (finding 8 through the command).
func TestCLIAnotherBucketRefused(t *testing.T) {
	dir, ba, bb := t.TempDir(), t.TempDir(), t.TempDir()
	urlA, urlB := "file://"+ba+"?prefix=p/", "file://"+bb+"?prefix=p/"
	ok(t, nil, "append", "--dir", dir, "--execution-id", "1", "--transaction-id", "t", "--payload", "x")
	ok(t, nil, "ship", "--dir", dir, "--bucket", urlA)
	before := readDirBytes(t, dir)
	r := runCLI(t, nil, "ship", "--dir", dir, "--bucket", urlB).want(t, 2, "usage")
	if !strings.Contains(r.stdout, urlA) || !strings.Contains(r.stdout, urlB) {
		t.Fatalf("the refusal does not name both buckets:\n%s", r)
	}
	// serve prints its listen line, then the error.
	cmd := exec.Command(binPath, "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--bucket", urlB)
	cmd.Env = baseEnv()
	out, _ := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), `"class":"usage"`) {
		t.Fatalf("serve with another bucket: exit %d\n%s", code, out)
	}
	if after := readDirBytes(t, dir); !maps.Equal(before, after) {
		t.Fatal("a refused ship or serve changed the store")
	}
	if got := readDirBytes(t, bb); len(got) != 0 {
		t.Fatalf("the other bucket received %d files", len(got))
	}
	ok(t, nil, "ship", "--dir", dir, "--bucket", urlA)
}

func readDirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
