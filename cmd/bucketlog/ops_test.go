package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

// TestVersion: `bucketlog version` and `bucketlog --version` print the
// build information as JSON, exit 0.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, nil, args...)
		if r.code != 0 || r.obj["action"] != "version" || r.obj["go_version"] != runtime.Version() || r.obj["version"] == "" || r.obj["commit"] == "" {
			t.Fatalf("%v:\n%s", args, r)
		}
	}
	runCLI(t, nil, "--version", "extra").want(t, 2, "usage")
}

// TestHelpFalse: --help=false is no request for help; --help=true is.
func TestHelpFalse(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t, nil, "scan", "--dir", dir, "--help=false")
	if r.code != 0 || strings.Contains(r.stdout, "usage:") || r.obj["action"] != "eventlog-scan" {
		t.Fatalf("--help=false printed help or failed:\n%s", r)
	}
}

// TestNoDoublePrefix: an error line names the program once.
func TestNoDoublePrefix(t *testing.T) {
	for _, args := range [][]string{{"nosuchcommand"}, {"scan", "--limit", "-1"}, {}} {
		r := runCLI(t, nil, args...)
		if r.code != 2 || strings.Contains(r.stderr, "bucketlog: bucketlog:") || strings.Contains(r.stderr, ": bucketlog: usage") {
			t.Fatalf("%v: a doubled prefix:\n%s", args, r)
		}
	}
}

// TestLogFlags: --log-level and --log-format apply to every command's
// stderr; bad values are usage errors.
func TestLogFlags(t *testing.T) {
	// An ignored environment value is a warning: shown at warn, hidden at
	// error, JSON with --log-format json.
	env := []string{"NOETL_EHDB_TAIL_INTERVAL_SECS=zero"}
	dir := t.TempDir()
	r := runCLI(t, env, "scan", "--dir", dir)
	if !strings.Contains(r.stderr, "level=WARN") {
		t.Fatalf("no text warning by default:\n%s", r)
	}
	r = runCLI(t, env, "scan", "--dir", dir, "--log-level", "error")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("--log-level error still logs a warning:\n%s", r)
	}
	r = runCLI(t, env, "scan", "--dir", dir, "--log-format", "json")
	line := strings.TrimSpace(r.stderr)
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] != "WARN" {
		t.Fatalf("--log-format json: %v\n%s", err, r)
	}
	runCLI(t, nil, "scan", "--dir", dir, "--log-level", "verbose").want(t, 2, "usage")
	runCLI(t, nil, "scan", "--dir", dir, "--log-format", "xml").want(t, 2, "usage")
}

// TestIntervalMinimums: a tick that would spin a core is refused (usage),
// never silently raised.
func TestIntervalMinimums(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--tail-interval", "1ns"},
		{"serve", "--listen", "127.0.0.1:0", "--seal-max-age", "1ms"},
		{"serve", "--listen", "127.0.0.1:0", "--startup-timeout", "0s"},
		{"append", "--tail-interval", "9ms", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"},
		{"selfcheck", "config", "--tail-interval", "1us"},
	} {
		r := runCLI(t, nil, append(args, "--dir", t.TempDir())...)
		r.want(t, 2, "usage")
	}
}

// TestREADMEMetricsAreServesRegistry: the README's metric tables list
// exactly the bucketlog_ metrics serve registers (the engine's and serve's
// own), no more, no fewer.
func TestREADMEMetricsAreServesRegistry(t *testing.T) {
	s := startServer(t, "--dir", t.TempDir(), "--bucket", "mem://readme-metrics")
	// consumer_lag exists once a consumer does.
	if code := do(t, "POST", s.base+"/v1/events", eventJSON("1", "t", "p"), nil); code != http.StatusCreated {
		t.Fatalf("append: %d", code)
	}
	if code := do(t, "POST", s.base+"/v1/consumers/c/pull", "", nil); code != http.StatusOK {
		t.Fatalf("pull: %d", code)
	}
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var served []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" && strings.HasPrefix(f[2], "bucketlog_") {
			served = append(served, f[2])
		}
	}
	if !slices.Contains(served, "bucketlog_build_info") || !strings.Contains(string(body), `bucketlog_build_info{commit="`) {
		t.Fatalf("no bucketlog_build_info on /metrics:\n%s", body)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?:`|<code>)(bucketlog_[a-z_]+)").FindAllStringSubmatch(string(readme), -1) {
		listed[m[1]] = true
	}
	for _, name := range served {
		if !listed[name] {
			t.Errorf("serve registers %s; the README does not list it", name)
		}
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("the README lists %s; serve does not register it", name)
	}
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.stderr)
	}
}

// TestStrictEventJSON: duplicate and differently-cased keys are refused
// (not last-wins), and a non-string payload gets our message, over HTTP
// (400) and in an --file (exit 4); `append --file -` reads stdin.
func TestStrictEventJSON(t *testing.T) {
	bad := map[string]struct{ body, has string }{
		"duplicate key":     {`{"execution_id":"1","transaction_id":"t","payload":"a","payload":"b"}`, `"payload" twice`},
		"differently cased": {`{"execution_id":"1","transaction_id":"t","payload":"a","Payload":"b"}`, "case-sensitive"},
		"cased only":        {`{"execution_id":"1","transaction_id":"t","Payload":"b"}`, "case-sensitive"},
		"object payload":    {`{"execution_id":"1","transaction_id":"t","payload":{"a":1}}`, "payload must be a JSON string, not an object"},
		"number id":         {`{"execution_id":1,"transaction_id":"t","payload":"p"}`, "execution_id must be a JSON string, not a number"},
		"batch twice":       {`{"events":[],"events":[{"execution_id":"1","transaction_id":"t","payload":"p"}]}`, `"events" twice`},
		"batch cased":       {`{"Events":[{"execution_id":"1","transaction_id":"t","payload":"p"}]}`, "case-sensitive"},
		"in a batch":        {`{"events":[{"execution_id":"1","transaction_id":"t","payload":"a","Payload":"b"}]}`, "events[0]"},
	}
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.Ownership{Index: 0, Count: 1}})
	a.setLog(l)
	for name, tc := range bad {
		code, out := call(t, a, "POST", "/v1/events", tc.body)
		msg, _ := out["error"].(string)
		if code != http.StatusBadRequest || out["class"] != "invalid_input" || !strings.Contains(msg, tc.has) || strings.Contains(msg, "json: cannot unmarshal") {
			t.Errorf("%s: %d %v, want 400 invalid_input naming %q", name, code, out, tc.has)
		}
	}
	if tip := l.Store().Tip(); tip != 0 {
		t.Fatalf("refused events were written: tip %d", tip)
	}
	code, out := call(t, a, "POST", "/v1/consumers/c/ack", `{"sequence":1,"Sequence":2}`)
	if code != http.StatusBadRequest || out["class"] != "invalid_input" {
		t.Errorf("ack with a cased duplicate: %d %v", code, out)
	}

	// The CLI: --file with a bad line, and --file - from stdin.
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "in.jsonl")
	writeFile(t, file, bad["differently cased"].body+"\n")
	r := runCLI(t, nil, "append", "--dir", dir, "--file", file)
	r.want(t, 4, "invalid_input")
	if !strings.Contains(r.stderr, "case-sensitive") {
		t.Fatalf("no clear message:\n%s", r)
	}
	cmd := exec.Command(binPath, "append", "--dir", dir, "--file", "-")
	cmd.Env = baseEnv()
	cmd.Stdin = strings.NewReader(eventJSON("1", "a", "x") + "\n" + eventJSON("1", "b", "y") + "\n")
	outb, err := cmd.Output()
	if err != nil || !strings.Contains(string(outb), `"appended":2`) {
		t.Fatalf("append --file - : %v %s", err, outb)
	}
}

// TestNoSecretInAnyOutput: a bucket URL carrying secrets — a password in
// the endpoint= URL, a ;token= parameter, a percent-encoded token inside
// the endpoint — never appears in clear on any output: append and inspect
// (stdout, stderr), bucket.json, selfcheck config, serve's start-up and
// shutdown log lines, and the errors of a refused re-point and of an
// unreachable bucket.
func TestNoSecretInAnyOutput(t *testing.T) {
	s3, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if err := s3.CreateBucket("redact"); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(s3.Endpoint(), "http://")
	secrets := []string{"PASSWORDpw1", "TOKENtk2", "TOKENtk3"}
	good := "s3://redact?endpoint=http://opuser:PASSWORDpw1@" + host + "&use_path_style=true&region=us-east-1&anonymous=true"
	other := "s3://other?endpoint=http%3A%2F%2F" + host + "%2F%3Ftoken%3DTOKENtk3&use_path_style=true&region=us-east-1&anonymous=true;token=TOKENtk2"
	down := "s3://redact?region=us-east-1;token=TOKENtk2&endpoint=http://opuser:PASSWORDpw1@127.0.0.1:1&use_path_style=true&anonymous=true"
	var outputs []string
	check := func(what string, texts ...string) {
		t.Helper()
		for _, txt := range texts {
			outputs = append(outputs, txt)
			for _, s := range secrets {
				if strings.Contains(txt, s) {
					t.Errorf("%s prints the secret %q:\n%s", what, s, txt)
				}
			}
		}
	}
	dir := t.TempDir()
	r := runCLI(t, nil, "append", "--dir", dir, "--bucket", good, "--execution-id", "1", "--transaction-id", "t", "--payload", "p")
	if r.code != 0 {
		t.Fatalf("append with the bucket: %s", r)
	}
	check("append", r.stdout, r.stderr)
	rec, err := os.ReadFile(filepath.Join(dir, "shard-0000", "bucket.json"))
	if err != nil {
		t.Fatal(err)
	}
	check("bucket.json", string(rec))
	r = runCLI(t, nil, "inspect", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "REDACTED") {
		t.Fatalf("inspect: %s", r)
	}
	check("inspect", r.stdout, r.stderr)
	for _, u := range []string{good, other, down} {
		r = runCLI(t, nil, "selfcheck", "config", "--bucket", u)
		check("selfcheck config", r.stdout, r.stderr)
	}
	// A re-point to another bucket is refused naming both, redacted.
	r = runCLI(t, nil, "append", "--dir", dir, "--bucket", other, "--execution-id", "1", "--transaction-id", "t", "--payload", "p")
	r.want(t, 2, "usage")
	check("the refused re-point", r.stdout, r.stderr)
	// serve: its start-up lines name the bucket redacted. (A fresh
	// directory, hydrated from the bucket: reopening a store whose
	// endpoint= carries userinfo is refused until the root package's
	// canonicalBucketURL ignores the endpoint's userinfo, as it ignores the
	// URL's own.)
	s := startServer(t, "--dir", t.TempDir(), "--bucket", good, "--log-level", "debug")
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "REDACTED") {
		t.Fatalf("serve's start-up lines do not name the bucket:\n%s", s.stderr)
	}
	check("serve", s.stderr.String())
	// An unreachable bucket: the errors of an empty directory's hydration.
	cmd := exec.Command(binPath, "serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--bucket", down, "--startup-timeout", "1s")
	cmd.Env = baseEnv()
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err == nil || !strings.Contains(so.String(), `"error"`) {
		t.Fatalf("serve on an unreachable bucket: %v\n%s\n%s", err, so.String(), se.String())
	}
	check("serve on an unreachable bucket", so.String(), se.String())
	r = runCLI(t, nil, "restore", "--dir", t.TempDir(), "--bucket", down)
	check("restore on an unreachable bucket", r.stdout, r.stderr)
	r = runCLI(t, nil, "verify", "--bucket", down)
	check("verify on an unreachable bucket", r.stdout, r.stderr)
}

// TestRouterErrorsAreJSON: the router's own 404 and 405 answer like every
// other error, JSON {"error","class"}, with Allow on a 405.
func TestRouterErrorsAreJSON(t *testing.T) {
	a := newAPI(apiConfig{own: affinity.Ownership{Index: 0, Count: 1}})
	for _, tc := range []struct {
		method, target string
		code           int
	}{
		{"GET", "/nope", http.StatusNotFound},
		{"GET", "/v1/events/x/y", http.StatusNotFound},
		{"PUT", "/v1/events", http.StatusMethodNotAllowed},
		{"POST", "/healthz", http.StatusMethodNotAllowed},
	} {
		req := httptest.NewRequest(tc.method, tc.target, nil)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		var out map[string]any
		if rec.Code != tc.code || rec.Header().Get("Content-Type") != "application/json" || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out["class"] != "usage" || out["error"] == "" {
			t.Errorf("%s %s: %d %q %q", tc.method, tc.target, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
		}
		if tc.code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.target)
		}
	}
}

// TestNoNullLists: every list of every JSON output is [] when empty, never
// null (only the raw documents inspect quotes may be null: a missing file).
func TestNoNullLists(t *testing.T) {
	root := t.TempDir()
	bucket := "file://" + filepath.Join(root, "bucket")
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "d")
	var outs []result
	outs = append(outs, ok(t, nil, "append", "--dir", dir, "--bucket", bucket, "--execution-id", "1", "--transaction-id", "t", "--payload", "p"))
	outs = append(outs, ok(t, nil, "ship", "--dir", dir, "--bucket", bucket, "--seal-active"))
	outs = append(outs, ok(t, nil, "verify", "--bucket", bucket))
	outs = append(outs, ok(t, nil, "restore", "--dir", filepath.Join(root, "r"), "--bucket", bucket))
	outs = append(outs, ok(t, nil, "inspect", "--dir", dir))
	outs = append(outs, ok(t, nil, "scan", "--dir", dir, "--limit", "0"))
	outs = append(outs, runCLI(t, nil, "gc", "--dir", dir, "--bucket", bucket)) // refused (no CAS), with its plan
	allowed := strings.NewReplacer(`"checkpoint":null`, "", `"reclaim_manifest":null`, "")
	for _, r := range outs {
		if s := allowed.Replace(r.stdout); strings.Contains(s, "null") {
			t.Errorf("a null in the output of bucketlog %s:\n%s", strings.Join(r.args, " "), r.stdout)
		}
	}
}

// TestVerifyAndRestoreDiscoverShards: without a shard list, verify checks
// every shard the bucket holds and says which; restore --all-shards
// restores each; --if-not-exists skips a directory that holds a store
// (exit 0, nothing done).
func TestVerifyAndRestoreDiscoverShards(t *testing.T) {
	root := t.TempDir()
	bdir := filepath.Join(root, "bucket")
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		t.Fatal(err)
	}
	bucket := "file://" + bdir
	for _, shard := range []int{0, 3} {
		dir := filepath.Join(root, "src")
		for i, id := range ownedIDs(shard, 4, 3) {
			ok(t, nil, "append", "--dir", dir, "--bucket", bucket, "--shard-index", strconv.Itoa(shard), "--shard-count", "4",
				"--execution-id", id, "--transaction-id", strconv.Itoa(i), "--payload", "p")
		}
		pair := []string{"NOETL_SHARD_INDEX=" + strconv.Itoa(shard), "NOETL_SHARD_COUNT=4"}
		ok(t, pair, "ship", "--dir", dir, "--bucket", bucket, "--seal-active")
	}
	r := ok(t, nil, "verify", "--bucket", bucket)
	if !strings.Contains(r.stdout, `"shards_found":[0,3]`) || len(r.obj["shards"].([]any)) != 2 {
		t.Fatalf("verify without shards:\n%s", r)
	}
	dst := filepath.Join(root, "dst")
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", dst, "--all-shards")
	if !strings.Contains(r.stdout, `"shards_found":[0,3]`) || len(r.obj["restored"].([]any)) != 2 || !strings.Contains(r.stderr, "[0 3]") {
		t.Fatalf("restore --all-shards:\n%s", r)
	}
	for _, shard := range []string{"0", "3"} {
		if s := ok(t, nil, "scan", "--dir", dst, "--shard", shard, "--limit", "0"); s.num(t, "record_count") != 3 {
			t.Fatalf("restored shard %s:\n%s", shard, s)
		}
	}
	before := ok(t, nil, "inspect", "--dir", dst, "--shard", "3").stdout
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", dst, "--all-shards", "--if-not-exists")
	if len(r.obj["restored"].([]any)) != 0 || len(r.obj["skipped"].([]any)) != 2 {
		t.Fatalf("restore --all-shards --if-not-exists over restored shards:\n%s", r)
	}
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", dst, "--shard", "3", "--if-not-exists")
	if r.obj["skipped"] != true {
		t.Fatalf("restore --if-not-exists:\n%s", r)
	}
	if after := ok(t, nil, "inspect", "--dir", dst, "--shard", "3").stdout; after != before {
		t.Fatalf("--if-not-exists changed the store:\n%s\n%s", before, after)
	}
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", dst, "--shard", "3").want(t, 3, "invalid_state")
	// --if-not-exists on an empty directory restores.
	if r = ok(t, nil, "restore", "--bucket", bucket, "--dir", filepath.Join(root, "new"), "--shard", "3", "--if-not-exists"); r.num(t, "last_sequence") != 3 {
		t.Fatalf("restore --if-not-exists into a new directory:\n%s", r)
	}
}

// TestStartupTimeout: --startup-timeout bounds how long serve retries a
// bucket that does not answer when it opens an existing store (the
// default is 30s): with 1s it gives up within seconds, exit 5.
func TestStartupTimeout(t *testing.T) {
	fb := newFlakyBucket(t, "startup")
	dir := t.TempDir()
	ok(t, nil, "append", "--dir", dir, "--bucket", fb.url, "--execution-id", "1", "--transaction-id", "t", "--payload", "p")
	fb.down.Store(true)
	start := time.Now()
	cmd := exec.Command(binPath, "serve", "--dir", dir, "--listen", "127.0.0.1:0", "--bucket", fb.url, "--startup-timeout", "1s")
	cmd.Env = baseEnv()
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	took := time.Since(start)
	if err == nil || cmd.ProcessState.ExitCode() != 5 || !strings.Contains(so.String(), `"class":"storage"`) {
		t.Fatalf("serve with the bucket down: %v after %v\n%s\n%s", err, took, so.String(), se.String())
	}
	if took > 20*time.Second {
		t.Fatalf("serve took %v to give up with --startup-timeout 1s", took)
	}
	t.Logf("gave up after %v", took)
}
