package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BuildBucketlog builds ../cmd/bucketlog (the module github.com/bucketlog/bucketlog
// as the bench's go.mod replaces it, built with its own go.mod) into dir
// and returns the binary's path.
func BuildBucketlog(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/bucketlog/bucketlog").Output()
	if err != nil {
		return "", fmt.Errorf("find the bucketlog module: %w", err)
	}
	root := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "bucketlog")
	cmd := exec.CommandContext(ctx, "go", "build", "-C", root, "-o", bin, "./cmd/bucketlog")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/bucketlog: %w: %s", err, msg)
	}
	return bin, nil
}

// Serve is a running `bucketlog serve`.
type Serve struct {
	bin  string
	args []string
	env  []string
	cmd  *exec.Cmd
	// URL is "http://127.0.0.1:PORT" (a new port after each restart).
	URL string
	// CPU is the user + system time of the process Stop ended.
	CPU time.Duration
	hc  *http.Client
}

// NewHTTPClient is a client with a connection per closed-loop client kept
// alive (net/http's default keeps 2 per host).
func NewHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns + 16
	tr.MaxIdleConnsPerHost = conns + 16
	return &http.Client{Transport: tr}
}

// StartServe starts `bin serve --dir dir --listen 127.0.0.1:0` with extra
// flags (a bucket, say) and the environment env added, and waits for
// /readyz.
func StartServe(ctx context.Context, bin, dir string, extra []string, env []string) (*Serve, error) {
	s := &Serve{bin: bin, args: append([]string{"serve", "--dir", dir, "--listen", "127.0.0.1:0"}, extra...),
		env: env, hc: NewHTTPClient(4)}
	return s, s.start(ctx)
}

func (s *Serve) start(ctx context.Context) error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stderr = io.Discard
	if os.Getenv("BENCH_SERVE_STDERR") != "" {
		cmd.Stderr = os.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	line, err := firstLine(ctx, out, 60*time.Second)
	if err != nil {
		s.Kill()
		return fmt.Errorf("serve: %w", err)
	}
	var o struct{ Listen string }
	if err := json.Unmarshal([]byte(line), &o); err != nil || o.Listen == "" {
		s.Kill()
		return fmt.Errorf("serve: first line %q is not its listen address", line)
	}
	s.URL = "http://" + o.Listen
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := s.hc.Get(s.URL + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("serve: not ready within 60s (last: %v)", err)
		}
		select {
		case <-ctx.Done():
			s.Kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill SIGKILLs serve and reaps it.
func (s *Serve) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Stop sends SIGTERM (serve's orderly stop: the tail ships once more) and
// waits; its exit status is returned as an error when not 0.
func (s *Serve) Stop() error {
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	err := s.cmd.Wait()
	if ps := s.cmd.ProcessState; ps != nil {
		s.CPU = ps.UserTime() + ps.SystemTime()
	}
	s.cmd = nil
	return err
}

// Restart SIGKILLs serve and starts it again with the same flags.
func (s *Serve) Restart(ctx context.Context) error {
	s.Kill()
	return s.start(ctx)
}

// Pid is the serve process's id (0 when not running).
func (s *Serve) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Count is the shard's record count (GET /v1/events?limit=0).
func (s *Serve) Count(ctx context.Context) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/v1/events?limit=0", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var page struct {
		RecordCount *uint64 `json:"record_count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK || page.RecordCount == nil {
		return 0, fmt.Errorf("GET /v1/events?limit=0: status %d, %v", resp.StatusCode, err)
	}
	return *page.RecordCount, nil
}

// EventJSON is the JSON of one event (payload is ASCII: no escaping).
func EventJSON(buf []byte, execID, txnID string, payload []byte) []byte {
	buf = append(buf, `{"execution_id":"`...)
	buf = append(buf, execID...)
	buf = append(buf, `","transaction_id":"`...)
	buf = append(buf, txnID...)
	buf = append(buf, `","payload":"`...)
	buf = append(buf, payload...)
	return append(buf, `"}`...)
}

// Post sends one POST /v1/events body and returns how many events the
// answer says were appended (1 for a single event answered 201; a batch's
// "appended"). Any other status is an error.
func Post(ctx context.Context, hc *http.Client, url string, body []byte, batch bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("POST /v1/events: status %d: %s", resp.StatusCode, bytes.TrimSpace(ans))
	}
	if !batch {
		return 1, nil
	}
	i := bytes.Index(ans, []byte(`"appended":`))
	if i < 0 {
		return 0, fmt.Errorf("POST /v1/events: no \"appended\" in %s", ans)
	}
	rest := ans[i+len(`"appended":`):]
	j := bytes.IndexAny(rest, ",}")
	if j < 0 {
		return 0, fmt.Errorf("POST /v1/events: bad answer %s", ans)
	}
	return strconv.Atoi(string(rest[:j]))
}
