package client_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog/internal/emulator"
)

// binPath is `bucketlog`, built by TestMain: the tests run a real serve
// process, as a user of the client would.
var binPath string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "bucketlog-client-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "bucketlog")
	if out, err := exec.Command("go", "build", "-o", binPath, "../cmd/bucketlog").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the command: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
			return 1
		}
	}
	return code
}

// hangGuard bounds waits that only a bug makes long; never a performance
// assertion.
const hangGuard = 2 * time.Minute

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
	s := l.b.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// serveProc is one `bucketlog serve` child.
type serveProc struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	stderr *lockedBuffer
	done   chan struct{}
}

// startServe starts serve --listen 127.0.0.1:0 args... and waits for
// /readyz 200.
func startServe(t testing.TB, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	p := &serveProc{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() {
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	select {
	case l, ok := <-line:
		var out struct{ Listen string }
		if !ok || json.Unmarshal([]byte(l), &out) != nil || out.Listen == "" {
			t.Fatalf("serve's listen line %q; stderr:\n%s", l, p.stderr)
		}
		p.base = "http://" + out.Listen
	case <-time.After(hangGuard):
		t.Fatalf("no listen line; stderr:\n%s", p.stderr)
	}
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("serve exited before ready; stderr:\n%s", p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never ready; stderr:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *serveProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// flakyBucket is a proxy in front of an S3 emulator whose bucket can go
// away (every request answers 503) and come back.
type flakyBucket struct {
	down atomic.Bool
	url  string
}

func newFlakyBucket(t testing.TB) *flakyBucket {
	t.Helper()
	s3, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Close() })
	if err := s3.CreateBucket("flaky"); err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(s3.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	fb := &flakyBucket{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fb.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	fb.url = strings.Replace(s3.URL("flaky"), s3.Endpoint(), srv.URL, 1)
	return fb
}

// newBucket starts an in-process S3 emulator (gofakes3) with one bucket
// and returns its URL.
func newBucket(t testing.TB) string {
	t.Helper()
	s3, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Close() })
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-")
	if err := s3.CreateBucket(name); err != nil {
		t.Fatal(err)
	}
	return s3.URL(name)
}
