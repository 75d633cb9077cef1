package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hangGuard bounds waits that only a bug makes long; it is never a
// performance assertion.
const hangGuard = 2 * time.Minute

// server is a `bucketlog serve` child process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	base   string // http://HOST:PORT
	stderr *lockedBuffer
	done   chan struct{}
	code   int
}

// startServer starts `bucketlog serve --listen 127.0.0.1:0 args...`, reads
// its listen line and waits until /readyz answers 200.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = baseEnv()
	s := &server{t: t, cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		_ = cmd.Wait()
		s.code = cmd.ProcessState.ExitCode()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	select {
	case line, ok := <-lines:
		if !ok {
			<-s.done
			t.Fatalf("serve printed nothing and exited %d; stderr:\n%s", s.code, s.stderr)
		}
		var out serveOutput
		if err := json.Unmarshal([]byte(line), &out); err != nil || out.Action != "serve" || out.Listen == "" {
			t.Fatalf("listen line %q: %v", line, err)
		}
		if strings.HasSuffix(out.Listen, ":0") {
			t.Fatalf("listen line names port 0, not the real port: %q", line)
		}
		s.base = "http://" + out.Listen
	case <-time.After(hangGuard):
		t.Fatalf("no listen line; stderr:\n%s", s.stderr)
	}
	s.waitReady()
	return s
}

func (s *server) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := http.Get(s.base + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.done:
			s.t.Fatalf("serve exited %d before ready; stderr:\n%s", s.code, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("serve never became ready; stderr:\n%s", s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig and returns the exit code.
func (s *server) stop(sig os.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(hangGuard):
		s.t.Fatalf("serve did not exit after %v; stderr:\n%s", sig, s.stderr)
	}
	return s.code
}

// httpClient is the test's plain net/http client, with enough idle
// connections for 32 concurrent clients.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: hangGuard}

// do sends a request and decodes a JSON answer into out (when not nil).
func do(t testing.TB, method, url, body string, out any) int {
	t.Helper()
	code, err := doErr(method, url, body, out)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// doErr is do for other goroutines than the test's.
func doErr(method, url, body string, out any) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %q: %w", method, url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, nil
}

// acked is one acknowledged event.
type acked struct {
	exec, txn, payload string
}

// ackLog records every acknowledged event by sequence; a sequence
// acknowledged twice is a failure.
type ackLog struct {
	mu   sync.Mutex
	seqs map[uint64]acked
	errs []string
}

func (a *ackLog) add(seq uint64, ev acked) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, dup := a.seqs[seq]; dup {
		a.errs = append(a.errs, fmt.Sprintf("sequence %d acknowledged twice (%v and %v)", seq, old, ev))
	}
	a.seqs[seq] = ev
}

// payloadOf is an event's payload: HTML-significant characters, quotes,
// non-ASCII, U+2028 and a newline, so a body that is not stored byte for
// byte shows.
func payloadOf(client, i, j int) string {
	return fmt.Sprintf("{\"client\":%d,\"req\":%d,\"item\":%d,\"s\":\"<a href=\\\"x\\\">&amp; é — 日本 \u2028 end\"}\n", client, i, j)
}

// drive appends from 32 concurrent clients, singles and batches, and
// returns every acknowledged event by sequence and the number of append
// requests.
func drive(t *testing.T, base string, clients, perClient int) (*ackLog, int) {
	t.Helper()
	log := &ackLog{seqs: map[uint64]acked{}}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				execID := strconv.Itoa(c*1000 + i%7)
				if i%3 == 2 {
					evs := make([]acked, 4)
					var parts []string
					for j := range evs {
						evs[j] = acked{exec: execID, txn: fmt.Sprintf("txn-%d-%d-%d", c, i, j), payload: payloadOf(c, i, j)}
						b, _ := json.Marshal(map[string]string{"execution_id": evs[j].exec, "transaction_id": evs[j].txn, "payload": evs[j].payload})
						parts = append(parts, string(b))
					}
					var out batchOutput
					code, err := doErr("POST", base+"/v1/events", `{"events":[`+strings.Join(parts, ",")+`]}`, &out)
					if err != nil || code != http.StatusCreated || out.Appended != 4 || out.LastSequence-out.FirstSequence != 3 {
						t.Errorf("batch append: %d %+v %v", code, out, err)
						return
					}
					for j, ev := range evs {
						log.add(out.FirstSequence+uint64(j), ev)
					}
					continue
				}
				ev := acked{exec: execID, txn: fmt.Sprintf("txn-%d-%d", c, i), payload: payloadOf(c, i, 0)}
				b, _ := json.Marshal(map[string]string{"execution_id": ev.exec, "transaction_id": ev.txn, "payload": ev.payload})
				var out appendOutput
				code, err := doErr("POST", base+"/v1/events", string(b), &out)
				if err != nil || code != http.StatusCreated || out.GlobalSequence == 0 || out.ByteLen != len(ev.payload) || out.ExecutionID != execID {
					t.Errorf("append: %d %+v %v", code, out, err)
					return
				}
				log.add(out.GlobalSequence, ev)
			}
		})
	}
	wg.Wait()
	if len(log.errs) > 0 {
		t.Fatalf("%d errors, first: %s", len(log.errs), log.errs[0])
	}
	return log, clients * perClient
}

// scanHTTP pages through the whole log over HTTP.
func scanHTTP(t *testing.T, base string) []record {
	t.Helper()
	var all []record
	after := uint64(0)
	for {
		var out scanOutput
		if code := do(t, "GET", fmt.Sprintf("%s/v1/events?after=%d&limit=500", base, after), "", &out); code != http.StatusOK {
			t.Fatalf("scan after %d: %d", after, code)
		}
		all = append(all, out.Records...)
		if out.Returned == 0 || uint64(out.Returned) == out.RecordCount {
			return all
		}
		after = out.Records[len(out.Records)-1].GlobalSequence
	}
}

// checkAllPresent checks that recs are exactly the acknowledged events:
// gapless from 1, each with its exact identifiers and payload, and nothing
// else.
func checkAllPresent(t *testing.T, recs []record, log *ackLog) {
	t.Helper()
	if len(recs) != len(log.seqs) {
		t.Errorf("the log holds %d events; %d were acknowledged", len(recs), len(log.seqs))
	}
	missing := 0
	for i, r := range recs {
		if r.GlobalSequence != uint64(i+1) {
			t.Fatalf("record %d has sequence %d: not gapless", i, r.GlobalSequence)
		}
		want, ok := log.seqs[r.GlobalSequence]
		if !ok {
			t.Errorf("sequence %d was never acknowledged", r.GlobalSequence)
			continue
		}
		if r.ExecutionID != want.exec || r.TransactionID != want.txn || r.Payload != want.payload || r.ByteLen != len(want.payload) {
			t.Errorf("sequence %d: got %+v, want %+v", r.GlobalSequence, r, want)
		}
	}
	for seq := range log.seqs {
		if seq > uint64(len(recs)) {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d acknowledged events are missing", missing)
	}
}

// metricValue reads one sample from a /metrics scrape.
func metricValue(t *testing.T, scrape, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(scrape)
	if m == nil {
		t.Fatalf("no sample %s in the scrape", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := httpClient.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	return string(b)
}

// TestServeProcess is the must-show: a real `serve` process, 32
// concurrent clients, reads, a consumer, a metrics scrape, SIGTERM (exit
// 0), a restart on the same directory, and every acknowledged event there
// with its exact payload, gapless.
func TestServeProcess(t *testing.T) {
	dir := t.TempDir()
	// Small segments, so the run crosses several rollovers.
	args := []string{"--dir", dir, "--segment-max-bytes", "65536"}
	s := startServer(t, args...)
	start := time.Now()
	log, requests := drive(t, s.base, 32, 30)
	t.Logf("%d append requests from 32 clients acknowledged %d events in %v", requests, len(log.seqs), time.Since(start).Round(time.Millisecond))
	checkAllPresent(t, scanHTTP(t, s.base), log)

	// A per-execution read returns that execution's events, in order.
	var rd readOutput
	if code := do(t, "GET", s.base+"/v1/executions/1003/events?limit=100000", "", &rd); code != http.StatusOK {
		t.Fatalf("read: %d", code)
	}
	var want []uint64
	for seq := uint64(1); seq <= uint64(len(log.seqs)); seq++ {
		if log.seqs[seq].exec == "1003" {
			want = append(want, seq)
		}
	}
	if len(rd.Records) != len(want) || rd.ServedBy != "owner_resident" {
		t.Fatalf("read of execution 1003: %d records (want %d), served by %q", len(rd.Records), len(want), rd.ServedBy)
	}
	for i, r := range rd.Records {
		if r.GlobalSequence != want[i] || r.Payload != log.seqs[want[i]].payload {
			t.Fatalf("read record %d: %+v", i, r)
		}
	}

	// A consumer pulls 10 and acks them.
	var tail tailOutput
	if code := do(t, "POST", s.base+"/v1/consumers/projector/pull?limit=10", "", &tail); code != http.StatusOK || !tail.CreatedConsumer || tail.Returned != 10 {
		t.Fatalf("pull: %d %+v", code, tail)
	}
	var ack ackOutput
	if code := do(t, "POST", s.base+"/v1/consumers/projector/ack", `{"sequence":10}`, &ack); code != http.StatusOK || ack.AckedSequence != 10 {
		t.Fatalf("ack: %d %+v", code, ack)
	}

	m := scrape(t, s.base)
	if got := metricValue(t, m, `bucketlog_eventlog_ops_total{operation="append",outcome="ok",shard="0"}`); got != float64(requests) {
		t.Errorf("append ops metric %v, want %d (one per request)", got, requests)
	}
	if got := metricValue(t, m, `bucketlog_eventlog_ops_total{operation="ack",outcome="ok",shard="0"}`); got != 1 {
		t.Errorf("ack ops metric %v, want 1", got)
	}
	if got := metricValue(t, m, `bucketlog_append_seconds_count{shard="0"}`); got != float64(requests) {
		t.Errorf("append_seconds count %v, want %d", got, requests)
	}

	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM; stderr:\n%s", code, s.stderr)
	}

	s2 := startServer(t, args...)
	checkAllPresent(t, scanHTTP(t, s2.base), log)
	if code := do(t, "POST", s2.base+"/v1/consumers/projector/pull?limit=1", "", &tail); code != http.StatusOK || tail.CreatedConsumer || tail.AckedSequence != 10 {
		t.Fatalf("the consumer's cursor did not survive the restart: %d %+v", code, tail)
	}
	// The restarted log continues the sequence.
	var out appendOutput
	if code := do(t, "POST", s2.base+"/v1/events", `{"execution_id":"9","transaction_id":"after-restart","payload":"p"}`, &out); code != http.StatusCreated || out.GlobalSequence != uint64(len(log.seqs))+1 {
		t.Fatalf("append after restart: %d %+v", code, out)
	}
	if code := s2.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("serve exited %d after SIGINT; stderr:\n%s", code, s2.stderr)
	}
}

// TestServeProcessBucket: serve ships to an S3 emulator with a tail tick
// far longer than the test, so the events of the unsealed segment reach the
// bucket only by the last shipment SIGTERM triggers. After SIGTERM the
// local directory is deleted and `bucketlog restore` rebuilds the shard
// from the bucket alone: every acknowledged event is there.
func TestServeProcessBucket(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGTERM ships the tail", syscall.SIGTERM},
		// RED control: SIGKILL skips the last shipment, and the restore
		// lacks the events of the unsealed segment — what the SIGTERM path
		// is for.
		{"RED SIGKILL loses the unshipped tail", syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s3, err := emulator.StartS3()
			if err != nil {
				t.Fatal(err)
			}
			defer s3.Close()
			if err := s3.CreateBucket("serve"); err != nil {
				t.Fatal(err)
			}
			url := s3.URL("serve")
			dir := t.TempDir()
			s := startServer(t, "--dir", dir, "--bucket", url, "--segment-max-bytes", "65536", "--tail-interval", "1h", "--seal-max-age", "1h")
			log, _ := drive(t, s.base, 32, 12)
			code := s.stop(tc.sig)
			if tc.sig == syscall.SIGTERM && code != 0 {
				t.Fatalf("serve exited %d after SIGTERM; stderr:\n%s", code, s.stderr)
			}

			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			restored := t.TempDir()
			res := runCLI(t, nil, "restore", "--bucket", url, "--dir", restored, "--shard", "0")
			if res.code != 0 {
				t.Fatalf("restore: %s", res)
			}
			stdout := res.stdout
			var rep struct {
				LastSeq     uint64 `json:"last_sequence"`
				TailRecords int    `json:"tail_records"`
				Segments    int    `json:"segments"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("restore output %q: %v", stdout, err)
			}
			t.Logf("%d events acknowledged; restore: %s", len(log.seqs), strings.TrimSpace(stdout))

			if tc.sig == syscall.SIGKILL {
				if rep.LastSeq >= uint64(len(log.seqs)) {
					t.Fatalf("RED control: the restore holds %d of %d events after SIGKILL with a 1h tick; the test cannot tell whether SIGTERM's shipment matters", rep.LastSeq, len(log.seqs))
				}
				t.Logf("RED control: SIGKILL lost sequences %d..%d (never shipped)", rep.LastSeq+1, len(log.seqs))
				return
			}
			if rep.TailRecords == 0 {
				t.Errorf("the restore used no tail object: the events of the unsealed segment did not come from SIGTERM's shipment")
			}
			// The restored directory serves every acknowledged event.
			s2 := startServer(t, "--dir", restored, "--bucket", url)
			checkAllPresent(t, scanHTTP(t, s2.base), log)
			if code := s2.stop(syscall.SIGTERM); code != 0 {
				t.Fatalf("restored serve exited %d; stderr:\n%s", code, s2.stderr)
			}
		})
	}
}

// ownedIDs returns n execution ids shard owns in a pool of count.
func ownedIDs(shard, count, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		id := strconv.Itoa(i)
		if affinity.ShardFor(id, count) == shard {
			ids = append(ids, id)
		}
	}
	return ids
}

// call runs one request through h and returns the status and the JSON
// answer (nil for an empty or non-JSON body).
func call(t *testing.T, h http.Handler, method, target, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			out = map[string]any{"raw": rec.Body.String()}
		}
	}
	return rec.Code, out
}

func eventJSON(id, txn, payload string) string {
	b, _ := json.Marshal(map[string]string{"execution_id": id, "transaction_id": txn, "payload": payload})
	return string(b)
}

// TestServeHandlerStatuses walks serve's HTTP statuses (serveAbout) through the handler,
// in order, over one engine owning shard 0 of 2. Every refusal is checked
// to have written nothing.
func TestServeHandlerStatuses(t *testing.T) {
	ctx := context.Background()
	const segMax = 4096
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), ShardIndex: 0, ShardCount: 2, SegmentMaxBytes: segMax, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	a := newAPI(apiConfig{own: affinity.Ownership{Index: 0, Count: 2}, segMax: segMax, maxBody: 1 << 20, gatherer: reg})

	// Before the engine is handed over, every /v1 request and /readyz
	// answer 503; /healthz answers 200.
	mine, theirs := ownedIDs(0, 2, 2), ownedIDs(1, 2, 1)[0]
	for _, req := range [][3]string{
		{"POST", "/v1/events", eventJSON(mine[0], "t", "p")},
		{"GET", "/v1/events", ""},
		{"GET", "/v1/executions/" + mine[0] + "/events", ""},
		{"POST", "/v1/consumers/c/pull", ""},
		{"POST", "/v1/consumers/c/ack", `{"sequence":1}`},
		{"DELETE", "/v1/consumers/c", ""},
		{"GET", "/readyz", ""},
	} {
		code, out := call(t, a, req[0], req[1], req[2])
		if code != http.StatusServiceUnavailable {
			t.Errorf("before ready: %s %s: %d %v", req[0], req[1], code, out)
		}
		if req[1] != "/readyz" && out["class"] != "storage" {
			t.Errorf("before ready: %s %s: class %v", req[0], req[1], out["class"])
		}
	}
	if code, _ := call(t, a, "GET", "/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz before ready: %d", code)
	}
	a.setLog(l)
	if code, out := call(t, a, "GET", "/readyz", ""); code != http.StatusOK || out["ready"] != true {
		t.Fatalf("/readyz once open: %d %v", code, out)
	}
	if code, out := call(t, a, "GET", "/v1/events", ""); code != http.StatusOK || out["exists"] != false {
		t.Fatalf("scan of an empty shard: %d %v", code, out)
	}

	many := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = eventJSON(mine[0], "t", "")
		}
		return `{"events":[` + strings.Join(parts, ",") + `]}`
	}
	big := strings.Repeat("x", segMax)
	cases := []struct {
		name, method, target, body string
		status                     int
		class                      string
		owner                      float64 // owner_shard when not_owner
	}{
		{"append", "POST", "/v1/events", eventJSON(mine[0], "t1", "<p>&é</p>"), 201, "", 0},
		{"batch", "POST", "/v1/events", `{"events":[` + eventJSON(mine[0], "t2", "a") + "," + eventJSON(mine[1], "t3", "b") + `]}`, 201, "", 0},
		{"not owner", "POST", "/v1/events", eventJSON(theirs, "t", "p"), 421, "not_owner", 1},
		{"batch with one not owned", "POST", "/v1/events", `{"events":[` + eventJSON(mine[0], "t", "a") + "," + eventJSON(theirs, "t", "b") + `]}`, 421, "not_owner", 1},
		{"batch with one invalid", "POST", "/v1/events", `{"events":[` + eventJSON(mine[0], "t", "a") + "," + eventJSON("bad id", "t", "b") + `]}`, 400, "invalid_input", 0},
		{"malformed JSON", "POST", "/v1/events", `{"execution_id":`, 400, "invalid_input", 0},
		{"not an object", "POST", "/v1/events", `[1,2]`, 400, "invalid_input", 0},
		{"unknown field", "POST", "/v1/events", `{"execution_id":"` + mine[0] + `","transaction_id":"t","payload":"p","extra":1}`, 400, "invalid_input", 0},
		{"missing payload", "POST", "/v1/events", `{"execution_id":"` + mine[0] + `","transaction_id":"t"}`, 400, "invalid_input", 0},
		{"trailing data", "POST", "/v1/events", eventJSON(mine[0], "t", "p") + `{}`, 400, "invalid_input", 0},
		{"bad execution id", "POST", "/v1/events", eventJSON("a/b", "t", "p"), 400, "invalid_input", 0},
		{"blank transaction id", "POST", "/v1/events", eventJSON(mine[0], "  ", "p"), 400, "invalid_input", 0},
		{"payload not UTF-8", "POST", "/v1/events", `{"execution_id":"` + mine[0] + `","transaction_id":"t","payload":"` + "\xff\xfe" + `"}`, 400, "invalid_input", 0},
		{"lone surrogate", "POST", "/v1/events", `{"execution_id":"` + mine[0] + `","transaction_id":"t","payload":"\udc00"}`, 400, "invalid_input", 0},
		{"events with another field", "POST", "/v1/events", `{"events":[` + eventJSON(mine[0], "t", "a") + `],"payload":"x"}`, 400, "invalid_input", 0},
		{"empty batch", "POST", "/v1/events", `{"events":[]}`, 400, "invalid_input", 0},
		{"null batch", "POST", "/v1/events", `{"events":null}`, 400, "invalid_input", 0},
		{"batch over 10000", "POST", "/v1/events", many(maxBatchEvents + 1), 413, "invalid_input", 0},
		{"event over the segment cap", "POST", "/v1/events", eventJSON(mine[0], "t", big), 413, "invalid_input", 0},
		{"body over the cap", "POST", "/v1/events", eventJSON(mine[0], "t", strings.Repeat("y", 1<<20)), 413, "invalid_input", 0},
		{"limit over 100000", "GET", "/v1/events?limit=100001", "", 400, "usage", 0},
		{"negative limit", "GET", "/v1/events?limit=-1", "", 400, "usage", 0},
		{"bad after", "GET", "/v1/events?after=x", "", 400, "usage", 0},
		{"unknown query parameter", "GET", "/v1/events?limt=5", "", 400, "usage", 0},
		{"repeated query parameter", "GET", "/v1/events?limit=1&limit=2", "", 400, "usage", 0},
		{"scan", "GET", "/v1/events?after=1&limit=100000", "", 200, "", 0},
		{"read", "GET", "/v1/executions/" + mine[0] + "/events", "", 200, "", 0},
		{"read not owned", "GET", "/v1/executions/" + theirs + "/events", "", 421, "not_owner", 1},
		{"read bad id", "GET", "/v1/executions/a%20b/events", "", 400, "invalid_input", 0},
		{"ack unknown consumer", "POST", "/v1/consumers/c/ack", `{"sequence":1}`, 404, "invalid_state", 0},
		{"delete unknown consumer", "DELETE", "/v1/consumers/c", "", 404, "invalid_state", 0},
		{"pull bad name", "POST", "/v1/consumers/a.b/pull", "", 400, "invalid_input", 0},
		{"pull limit over 100000", "POST", "/v1/consumers/c/pull?limit=100001", "", 400, "usage", 0},
		{"pull", "POST", "/v1/consumers/c/pull?limit=1", "", 200, "", 0},
		{"ack 0", "POST", "/v1/consumers/c/ack", `{"sequence":0}`, 409, "invalid_state", 0},
		{"ack beyond the tip", "POST", "/v1/consumers/c/ack", `{"sequence":4}`, 409, "invalid_state", 0},
		{"ack missing sequence", "POST", "/v1/consumers/c/ack", `{}`, 400, "invalid_input", 0},
		{"ack negative", "POST", "/v1/consumers/c/ack", `{"sequence":-1}`, 400, "invalid_input", 0},
		{"ack unknown field", "POST", "/v1/consumers/c/ack", `{"sequence":1,"consumer":"c"}`, 400, "invalid_input", 0},
		{"ack", "POST", "/v1/consumers/c/ack", `{"sequence":3}`, 200, "", 0},
		{"ack below the cursor", "POST", "/v1/consumers/c/ack", `{"sequence":2}`, 200, "", 0},
		{"delete", "DELETE", "/v1/consumers/c", "", 204, "", 0},
		{"delete again", "DELETE", "/v1/consumers/c", "", 404, "invalid_state", 0},
		{"wrong method", "GET", "/v1/consumers/c/ack", "", 405, "", 0},
	}
	for _, tc := range cases {
		tipBefore := l.Store().Tip()
		code, out := call(t, a, tc.method, tc.target, tc.body)
		if code != tc.status {
			t.Errorf("%s: status %d, want %d (%v)", tc.name, code, tc.status, out)
			continue
		}
		if tc.class != "" {
			if out["class"] != tc.class || out["error"] == nil || out["error"] == "" {
				t.Errorf("%s: body %v, want class %s and an error", tc.name, out, tc.class)
			}
		}
		if tc.class == "not_owner" && out["owner_shard"] != tc.owner {
			t.Errorf("%s: owner_shard %v, want %v", tc.name, out["owner_shard"], tc.owner)
		}
		if code >= 400 && l.Store().Tip() != tipBefore {
			t.Errorf("%s: refused with %d but the tip moved %d → %d", tc.name, code, tipBefore, l.Store().Tip())
		}
	}
	// The refusals wrote nothing: the shard holds the three events the
	// successful appends acknowledged, and the payload byte for byte.
	code, out := call(t, a, "GET", "/v1/events", "")
	if recs, _ := out["records"].([]any); code != 200 || len(recs) != 3 || recs[0].(map[string]any)["payload"] != "<p>&é</p>" {
		t.Fatalf("final scan: %d %v", code, out)
	}

	// A closed engine answers 503 (storage).
	l.Close()
	if code, out := call(t, a, "POST", "/v1/events", eventJSON(mine[0], "t", "p")); code != 503 || out["class"] != "storage" {
		t.Errorf("append after close: %d %v", code, out)
	}
	if code, _ := call(t, a, "GET", "/readyz", ""); code != 503 {
		t.Errorf("/readyz after close: %d", code)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestServeHandlerBucketFailing: in synchronous mode an append the bucket
// does not confirm answers 202 with its outcome and class not_in_bucket
// (the event is kept, once); with the bucket refusing, appends keep
// working and /readyz stays 200 (readiness is "takes appends") while
// /v1/status says degraded, and it recovers when the bucket does.
func TestServeHandlerBucketFailing(t *testing.T) {
	ctx := context.Background()
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Bucket: b, SyncToBucket: true,
		SyncWait: 300 * time.Millisecond, TailInterval: 50 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)

	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t1", "confirmed")); code != 201 || out["global_sequence"] != 1.0 {
		t.Fatalf("synchronous append with the bucket up: %d %v", code, out)
	}
	rule := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal})
	code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t2", "unconfirmed"))
	if code != http.StatusAccepted || out["class"] != "not_in_bucket" || out["global_sequence"] != 2.0 ||
		out["action"] != "eventlog-append" || !strings.Contains(fmt.Sprint(out["error"]), "retry with the same transaction id is safe") {
		t.Fatalf("synchronous append with the bucket refusing: %d %v", code, out)
	}
	code, out = call(t, a, "POST", "/v1/events", `{"events":[`+eventJSON("1", "t3", "a")+","+eventJSON("1", "t4", "b")+`]}`)
	if code != http.StatusAccepted || out["class"] != "not_in_bucket" || out["first_sequence"] != 3.0 || out["last_sequence"] != 4.0 {
		t.Fatalf("synchronous batch with the bucket refusing: %d %v", code, out)
	}
	waitStatus(t, a, "degraded", func(st map[string]any) bool { return st["state"] == "degraded" })
	waitReadyz(t, a, http.StatusOK, "")

	fb.Remove(rule)
	waitStatus(t, a, "ready", func(st map[string]any) bool { return st["state"] == "ready" })
	waitReadyz(t, a, http.StatusOK, "")
	code, out = call(t, a, "GET", "/v1/events", "")
	if recs, _ := out["records"].([]any); code != 200 || len(recs) != 4 {
		t.Fatalf("after recovery the shard should hold each event once: %d %v", code, out)
	}
}

// waitReadyz polls /readyz until it answers status (with reason in its
// reason when given).
func waitReadyz(t *testing.T, h http.Handler, status int, reason string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		code, out := call(t, h, "GET", "/readyz", "")
		if code == status && strings.Contains(fmt.Sprint(out["reason"]), reason) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz stayed %d %v, want %d with %q", code, out, status, reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flakyBucket is an HTTP proxy in front of an S3 emulator whose bucket
// can go away (every request answers 503) and come back.
type flakyBucket struct {
	down atomic.Bool
	srv  *httptest.Server
	url  string
}

func newFlakyBucket(t *testing.T, name string) *flakyBucket {
	t.Helper()
	s3, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Close() })
	if err := s3.CreateBucket(name); err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(s3.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	fb := &flakyBucket{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	fb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fb.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(fb.srv.Close)
	fb.url = strings.Replace(s3.URL(name), s3.Endpoint(), fb.srv.URL, 1)
	return fb
}

// TestServeProcessBucketDown: with the bucket gone after start, serve keeps
// appending (201); a stop signal (SIGTERM, SIGINT and SIGHUP alike) while
// it is still down exits 7 (not_in_bucket) and logs at ERROR the unshipped
// range, the events staying durable on the local disk; with the bucket
// back before the signal it exits 0.
func TestServeProcessBucketDown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sig     syscall.Signal
		comesUp bool
		want    int
	}{
		{"SIGTERM while down", syscall.SIGTERM, false, 7},
		{"SIGHUP while down", syscall.SIGHUP, false, 7},
		{"SIGINT while down", syscall.SIGINT, false, 7},
		{"SIGTERM with the bucket back", syscall.SIGTERM, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFlakyBucket(t, "down")
			dir := t.TempDir()
			s := startServer(t, "--dir", dir, "--bucket", fb.url, "--tail-interval", "100ms", "--shutdown-ship-timeout", "1s")
			fb.down.Store(true)
			for i := range 20 {
				var out appendOutput
				if code := do(t, "POST", s.base+"/v1/events", eventJSON("1", fmt.Sprint("t", i), "while the bucket is down"), &out); code != http.StatusCreated || out.GlobalSequence != uint64(i+1) {
					t.Fatalf("append %d with the bucket down: %d %+v", i, code, out)
				}
			}
			if tc.comesUp {
				time.Sleep(300 * time.Millisecond)
				fb.down.Store(false)
			}
			code := s.stop(tc.sig)
			if code != tc.want {
				t.Fatalf("serve exited %d after %v, want %d; stderr:\n%s", code, tc.sig, tc.want, s.stderr)
			}
			stderr := s.stderr.String()
			if tc.want == 7 {
				if !strings.Contains(stderr, "level=ERROR") || !strings.Contains(stderr, "sequences 1..20") {
					t.Fatalf("no ERROR line naming the unshipped sequences 1..20; stderr:\n%s", stderr)
				}
			} else if strings.Contains(stderr, "not in the bucket") {
				t.Fatalf("the bucket came back, yet serve reports unshipped events; stderr:\n%s", stderr)
			}
			// The events are on the local disk.
			res := runCLI(t, nil, "scan", "--dir", dir)
			if res.code != 0 || res.num(t, "record_count") != 20 {
				t.Fatalf("scan after the stop: %s", res)
			}
		})
	}
}

// TestServeUsage: bad flags and configurations exit 2 before listening;
// a shard that cannot open exits with its class after the listen line.
func TestServeUsage(t *testing.T) {
	for name, tc := range map[string]struct {
		env  []string
		args []string
	}{
		"bad listen address":   {nil, []string{"--listen", "nohost:notaport"}},
		"partial shard pair":   {nil, []string{"--shard-index", "1"}},
		"shard beyond count":   {nil, []string{"--shard-index", "2", "--shard-count", "2"}},
		"sync without bucket":  {nil, []string{"--sync-to-bucket"}},
		"local_reference":      {[]string{"NOETL_EHDB_EVENTLOG_BACKEND=local_reference"}, nil},
		"zero max body":        {nil, []string{"--max-body-bytes", "0"}},
		"positional argument":  {nil, []string{"extra"}},
		"refuse without bound": {nil, []string{"--bucket", "mem://x", "--refuse-when-unshipped"}},
		"bound without bucket": {nil, []string{"--max-unshipped-age", "1m"}},
		"zero bound":           {nil, []string{"--bucket", "mem://x", "--max-unshipped-age", "0s"}},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0"}, tc.args...)
			runCLI(t, tc.env, args...).want(t, 2, "usage")
		})
	}

	// A shard directory that ships to a bucket, served without it: the
	// listen line, then the error, exit 2.
	dir := t.TempDir()
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: dir, BucketURL: "mem://serve-usage", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	cmd := exec.Command(binPath, "serve", "--dir", dir, "--listen", "127.0.0.1:0")
	cmd.Env = baseEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if cmd.ProcessState.ExitCode() != 2 || len(lines) != 2 || !strings.Contains(lines[0], `"action":"serve"`) || !strings.Contains(lines[1], `"class":"usage"`) {
		t.Fatalf("serve without the shard's bucket: %v exit %d\nstdout: %s\nstderr: %s", err, cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
	}
}
