package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRun builds bucketlog, starts `serve` and runs the example against it.
func TestRun(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bucketlog")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/bucketlog").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--dir", t.TempDir())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	var listen struct{ Listen string }
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &listen) != nil {
		t.Fatalf("no listen line: %q", sc.Text())
	}
	addr := "http://" + listen.Listen
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("serve never ready")
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), addr, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"shipped at sequence 4; the retry: sequence 4, duplicate true", "consumer shipping read 4 order-42", "consumer shipping acked 4, 0 pending"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
