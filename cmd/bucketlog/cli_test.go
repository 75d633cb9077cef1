package main

// These tests build the command once and run it as a real process, the way
// an operator or a script does: exit codes, the one JSON object on stdout,
// the one line on stderr, and the shard directory byte for byte before and
// after every refused input.
//
// This file holds the package's only TestMain (Go allows one per package):
// tests in other files of the package use binPath and runCLI from here.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bucketlog/bucketlog/localseg"
)

// binPath is the command built by TestMain. It is built without the race
// detector even under -race: its concurrency is the engine's, which the
// engine's own tests run under the detector, and a race-built binary made
// this package's run ten times slower.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "bucketlog-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "bucketlog")
	build := exec.Command("go", "build", "-o", binPath, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the command: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	if code == 0 {
		// The tests start emulators and servers in this process; none may
		// outlive them. Idle HTTP client connections and gocloud's
		// OpenCensus worker are not ours and end with the process.
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

// result is one run of the command.
type result struct {
	args           []string
	code           int
	stdout, stderr string
	// obj is stdout decoded (numbers as json.Number); keys its top-level
	// keys in order.
	obj  map[string]any
	keys []string
}

func (r result) String() string {
	return fmt.Sprintf("bucketlog %s → exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// baseEnv is the environment every run starts from: no NOETL_* or
// BUCKETLOG_* variable of the machine leaks in.
func baseEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if v := os.Getenv("TMPDIR"); v != "" {
		env = append(env, "TMPDIR="+v)
	}
	return env
}

// runCLI runs the command with env added to baseEnv and checks what every
// run must satisfy: stdout is exactly one JSON object on one line; a
// failure has "error" and "class" in it and its message on stderr.
func runCLI(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard only
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(baseEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	if isHelp(args) {
		return r
	}
	if strings.Count(r.stdout, "\n") != 1 || !strings.HasSuffix(r.stdout, "\n") {
		t.Fatalf("stdout is not one line:\n%s", r)
	}
	r.obj, r.keys = decodeObject(t, r.stdout)
	if r.code != 0 {
		msg, _ := r.obj["error"].(string)
		if msg == "" || r.obj["class"] == nil {
			t.Fatalf("a failure without error and class:\n%s", r)
		}
		if !strings.Contains(r.stderr, msg) {
			t.Fatalf("stderr does not carry the error:\n%s", r)
		}
	}
	return r
}

func isHelp(args []string) bool {
	return slices.Contains(args, "--help") || slices.Contains(args, "-h") || (len(args) > 0 && args[0] == "help" && len(args) < 3)
}

// decodeObject decodes one JSON object and lists its top-level keys in
// order.
func decodeObject(t *testing.T, s string) (map[string]any, []string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, s)
	}
	return obj, objectKeys(t, s)
}

func objectKeys(t *testing.T, s string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", s)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// want checks the exit code (and the class when it is not 0).
func (r result) want(t *testing.T, code int, class string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d:\n%s", r.code, code, r)
	}
	if code != 0 && r.obj != nil && r.obj["class"] != class {
		t.Fatalf("class %v, want %s:\n%s", r.obj["class"], class, r)
	}
	return r
}

// ok runs and requires exit 0.
func ok(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runCLI(t, env, args...).want(t, 0, "")
}

func (r result) num(t *testing.T, key string) int64 {
	t.Helper()
	n, ok := r.obj[key].(json.Number)
	if !ok {
		t.Fatalf("%s is not a number:\n%s", key, r)
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (r result) wantKeys(t *testing.T, keys ...string) {
	t.Helper()
	if !slices.Equal(r.keys, keys) {
		t.Fatalf("keys %v, want %v:\n%s", r.keys, keys, r)
	}
}

func (r result) records(t *testing.T) []map[string]any {
	t.Helper()
	raw, ok := r.obj["records"].([]any)
	if !ok {
		t.Fatalf("no records array:\n%s", r)
	}
	var out []map[string]any
	for _, x := range raw {
		out = append(out, x.(map[string]any))
	}
	return out
}

// tree is every entry under root: directories, and files with their size
// and SHA-256, so a comparison proves nothing was written.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) && path == root {
			return fs.SkipDir
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[rel] = fmt.Sprintf("%d %s", len(data), hex.EncodeToString(sum[:]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("changed or created: %s (%s → %s)", k, before[k], v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("removed: %s", k)
			}
		}
		t.FailNow()
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// seeded returns a store root whose shard 0 holds two events.
func seeded(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	ok(t, nil, "append", "--dir", dir, "--execution-id", "100", "--transaction-id", "t1", "--payload", "one")
	ok(t, nil, "append", "--dir", dir, "--execution-id", "200", "--transaction-id", "t2", "--payload", "two")
	return dir
}

// execOwnedBy returns a decimal execution id that shard owns of count.
func execOwnedBy(t *testing.T, shard, count int) string {
	t.Helper()
	for i := 1000; i < 100000; i++ {
		id := fmt.Sprint(i)
		if ownerOf(id, count) == shard {
			return id
		}
	}
	t.Fatal("no execution id found")
	return ""
}

// TestHappyPaths runs every log command on one store and checks each
// output's exact shape and values (doc.go; CHECKLIST §1.1–1.4).
func TestHappyPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	payload := `<a href="x">&amp; é — 日本</a>` + "\u2028"

	r := ok(t, nil, "append", "--dir", dir, "--execution-id", " 100 ", "--transaction-id", "txn-1", "--payload", payload)
	r.wantKeys(t, "action", "execution_id", "global_sequence", "byte_len", "created_stream", "log_record_count")
	if r.obj["action"] != "eventlog-append" || r.obj["execution_id"] != "100" || r.num(t, "global_sequence") != 1 ||
		r.num(t, "byte_len") != int64(len(payload)) || r.obj["created_stream"] != true || r.num(t, "log_record_count") != 1 {
		t.Fatalf("first append:\n%s", r)
	}
	// stdout carries the payload byte for byte (no HTML escaping).
	r = ok(t, nil, "append", "--dir", dir, "--execution-id", "200", "--transaction-id", "txn-2", "--payload", "")
	if r.num(t, "global_sequence") != 2 || r.obj["created_stream"] != false || r.num(t, "byte_len") != 0 {
		t.Fatalf("second append:\n%s", r)
	}

	file := writeFile(t, filepath.Join(t.TempDir(), "events.jsonl"),
		`{"execution_id":"100","transaction_id":"txn-3","payload":"three \ud83d\ude80"}`+"\n\n"+
			`{"payload":"four","execution_id":"300","transaction_id":"txn-4"}`+"\r\n")
	r = ok(t, nil, "append", "--dir", dir, "--file", file)
	r.wantKeys(t, "action", "appended", "first_sequence", "last_sequence")
	if r.obj["action"] != "eventlog-append-batch" || r.num(t, "appended") != 2 || r.num(t, "first_sequence") != 3 || r.num(t, "last_sequence") != 4 {
		t.Fatalf("batch:\n%s", r)
	}

	r = ok(t, nil, "scan", "--dir", dir)
	r.wantKeys(t, "action", "exists", "base", "clamped", "record_count", "returned", "records")
	if r.obj["action"] != "eventlog-scan" || r.obj["exists"] != true || r.num(t, "base") != 1 || r.num(t, "record_count") != 4 || r.num(t, "returned") != 4 {
		t.Fatalf("scan:\n%s", r)
	}
	recs := r.records(t)
	if got := objectKeys(t, mustMarshal(t, recs[0])); !slices.Equal(got, []string{"byte_len", "execution_id", "global_sequence", "payload", "transaction_id"}) {
		t.Fatalf("record keys %v", got)
	}
	if !strings.Contains(r.stdout, `{"global_sequence":1,"execution_id":"100","transaction_id":"txn-1","byte_len":`) {
		t.Fatalf("record field order:\n%s", r)
	}
	if recs[0]["payload"] != payload || recs[2]["payload"] != "three 🚀" {
		t.Fatalf("payloads %q %q", recs[0]["payload"], recs[2]["payload"])
	}
	if !strings.Contains(r.stdout, `<a href=\"x\">&amp; é — 日本</a>`) {
		t.Fatalf("payload escaped on stdout:\n%s", r.stdout)
	}
	r = ok(t, nil, "scan", "--dir", dir, "--after", "1", "--limit", "2")
	if r.num(t, "record_count") != 3 || r.num(t, "returned") != 2 || r.records(t)[0]["global_sequence"] != json.Number("2") {
		t.Fatalf("paged scan:\n%s", r)
	}
	r = ok(t, nil, "scan", "--dir", dir, "--limit", "0")
	if r.num(t, "record_count") != 4 || r.num(t, "returned") != 0 || len(r.records(t)) != 0 || !strings.Contains(r.stdout, `"records":[]`) {
		t.Fatalf("count-only scan:\n%s", r)
	}

	r = ok(t, nil, "read", "--dir", dir, "--execution-id", "100")
	r.wantKeys(t, "action", "execution_id", "exists", "base", "clamped", "record_count", "returned", "records", "shard", "served_by")
	if r.obj["action"] != "eventlog-read-exec" || r.num(t, "record_count") != 2 || r.obj["served_by"] != "owner_resident" {
		t.Fatalf("read:\n%s", r)
	}
	if seqs := []any{r.records(t)[0]["global_sequence"], r.records(t)[1]["global_sequence"]}; !reflect.DeepEqual(seqs, []any{json.Number("1"), json.Number("3")}) {
		t.Fatalf("read sequences %v", seqs)
	}
	r = ok(t, nil, "read", "--dir", dir, "--execution-id", "999")
	if r.obj["exists"] != false || r.num(t, "returned") != 0 {
		t.Fatalf("read of an unknown execution:\n%s", r)
	}

	r = ok(t, nil, "tail", "--dir", dir, "--consumer", "proj", "--limit", "1")
	r.wantKeys(t, "action", "consumer", "exists", "created_consumer", "acked_sequence", "pending_count", "returned", "records")
	if r.obj["action"] != "eventlog-tail" || r.obj["created_consumer"] != true || r.num(t, "pending_count") != 4 || r.num(t, "returned") != 1 {
		t.Fatalf("tail:\n%s", r)
	}
	r = ok(t, nil, "ack", "--dir", dir, "--consumer", "proj", "--sequence", "3")
	r.wantKeys(t, "action", "consumer", "acked_sequence")
	if r.obj["action"] != "eventlog-ack" || r.num(t, "acked_sequence") != 3 {
		t.Fatalf("ack:\n%s", r)
	}
	// Acking below the cursor is a no-op that succeeds.
	if r = ok(t, nil, "ack", "--dir", dir, "--consumer", "proj", "--sequence", "2"); r.num(t, "acked_sequence") != 3 {
		t.Fatalf("ack below the cursor:\n%s", r)
	}
	r = ok(t, nil, "tail", "--dir", dir, "--consumer", "proj")
	if r.obj["created_consumer"] != false || r.num(t, "acked_sequence") != 3 || r.num(t, "pending_count") != 1 || r.records(t)[0]["global_sequence"] != json.Number("4") {
		t.Fatalf("tail after ack:\n%s", r)
	}
	r = ok(t, nil, "consumer-delete", "--dir", dir, "--consumer", "proj")
	r.wantKeys(t, "action", "consumer", "deleted")
	if r.obj["action"] != "eventlog-consumer-delete" || r.obj["deleted"] != true {
		t.Fatalf("consumer-delete:\n%s", r)
	}
	if r = ok(t, nil, "tail", "--dir", dir, "--consumer", "proj"); r.obj["created_consumer"] != true {
		t.Fatalf("a deleted consumer came back:\n%s", r)
	}

	r = ok(t, nil, "inspect", "--dir", dir)
	if r.obj["action"] != "inspect" || r.num(t, "tip") != 4 || r.obj["exists"] != true || len(r.obj["problems"].([]any)) != 0 {
		t.Fatalf("inspect:\n%s", r)
	}
	// --root is --dir.
	if r = ok(t, nil, "scan", "--root", dir, "--limit", "0"); r.num(t, "record_count") != 4 {
		t.Fatalf("--root:\n%s", r)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEmptyShardReadsCreateNothing: scan, read and tail of a shard that was
// never written answer "does not exist" and create nothing (CHECKLIST
// §1.9, §1.15).
func TestEmptyShardReadsCreateNothing(t *testing.T) {
	// A root that does not exist is a usage error (a mistyped --dir must
	// not look like an empty log); one that exists without the shard's
	// directory is an empty shard.
	missing := filepath.Join(t.TempDir(), "never")
	for _, args := range [][]string{{"scan"}, {"read", "--execution-id", "1"}, {"tail", "--consumer", "c"}, {"inspect"}} {
		r := runCLI(t, nil, append(args, "--dir", missing)...).want(t, 2, "usage")
		if !strings.Contains(r.stderr, "does not exist") {
			t.Fatalf("%v: %s", args, r)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a read created %s: %v", missing, err)
	}
	dir := t.TempDir()
	r := ok(t, nil, "scan", "--dir", dir)
	if r.obj["exists"] != false || r.num(t, "base") != 1 || r.num(t, "record_count") != 0 {
		t.Fatalf("scan:\n%s", r)
	}
	if r = ok(t, nil, "read", "--dir", dir, "--execution-id", "1"); r.obj["exists"] != false {
		t.Fatalf("read:\n%s", r)
	}
	if r = ok(t, nil, "tail", "--dir", dir, "--consumer", "c"); r.obj["exists"] != false || r.obj["created_consumer"] != false {
		t.Fatalf("tail:\n%s", r)
	}
	runCLI(t, nil, "ack", "--dir", dir, "--consumer", "c", "--sequence", "1").want(t, 3, "invalid_state")
	runCLI(t, nil, "consumer-delete", "--dir", dir, "--consumer", "c").want(t, 3, "invalid_state")
	if r = ok(t, nil, "inspect", "--dir", dir); r.obj["exists"] != false {
		t.Fatalf("inspect:\n%s", r)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("a read created %v in %s: %v", entries, dir, err)
	}
}

// badCase is one refused input: the command runs against a seeded store
// (after setup), must exit with code and class, and must leave the store
// byte for byte as it was.
type badCase struct {
	name  string
	args  []string // --dir DIR is added unless noDir
	env   []string
	setup func(t *testing.T, dir string) (cleanup func())
	code  int
	class string
	// stderrHas is a substring the error must contain.
	stderrHas string
	owner     int // for not_owner: the owner shard the output must name
	noDir     bool
	// needsStore: setup works on the seeded store, so the row does not
	// also run against a root that does not exist yet.
	needsStore bool
}

// TestBadInput is the bad-input table: every refusal gets its exit code,
// one line on stderr, the error object on stdout, and writes nothing.
func TestBadInput(t *testing.T) {
	long := strings.Repeat("a", 257)
	owned1 := execOwnedBy(t, 1, 2)
	eventsFile := func(lines ...string) func(t *testing.T, dir string) func() {
		return func(t *testing.T, dir string) func() {
			writeFile(t, filepath.Join(filepath.Dir(dir), "in.jsonl"), strings.Join(lines, "\n")+"\n")
			return nil
		}
	}
	const good = `{"execution_id":"100","transaction_id":"t","payload":"ok"}`
	fileArg := func(dir string) string { return filepath.Join(filepath.Dir(dir), "in.jsonl") }
	cases := []badCase{
		{name: "bad execution id", args: []string{"append", "--execution-id", "a b", "--transaction-id", "t", "--payload", "p"}, code: 4, class: "invalid_input"},
		{name: "blank execution id", args: []string{"append", "--execution-id", "   ", "--transaction-id", "t", "--payload", "p"}, code: 4, class: "invalid_input"},
		{name: "execution id too long", args: []string{"append", "--execution-id", long, "--transaction-id", "t", "--payload", "p"}, code: 4, class: "invalid_input"},
		{name: "execution id with slash", args: []string{"append", "--execution-id", "../x", "--transaction-id", "t", "--payload", "p"}, code: 4, class: "invalid_input"},
		{name: "blank transaction id", args: []string{"append", "--execution-id", "1", "--transaction-id", " ", "--payload", "p"}, code: 4, class: "invalid_input"},
		{name: "payload not UTF-8", args: []string{"append", "--execution-id", "1", "--transaction-id", "t", "--payload", "a\xffb"}, code: 4, class: "invalid_input", stderrHas: "UTF-8"},
		{name: "transaction id not UTF-8", args: []string{"append", "--execution-id", "1", "--transaction-id", "t\xc3", "--payload", "p"}, code: 4, class: "invalid_input"},
		{name: "event too large", args: []string{"append", "--segment-max-bytes", "1024", "--execution-id", "1", "--transaction-id", "t", "--payload", strings.Repeat("x", 1100)}, code: 4, class: "invalid_input", stderrHas: "too large"},
		{name: "event too large by env", env: []string{"NOETL_EHDB_EVENTLOG_SEGMENT_MAX_BYTES=512"}, args: []string{"append", "--execution-id", "1", "--transaction-id", "t", "--payload", strings.Repeat("x", 600)}, code: 4, class: "invalid_input"},
		{name: "file malformed JSON", setup: eventsFile(good, `{"execution_id":"100","transaction_id":`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input", stderrHas: "line 2"},
		{name: "file not UTF-8", setup: eventsFile(good, "{\"execution_id\":\"1\",\"transaction_id\":\"t\",\"payload\":\"\xfe\"}"), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input", stderrHas: "line 2"},
		{name: "file lone high surrogate", setup: eventsFile(`{"execution_id":"1","transaction_id":"t","payload":"x\ud800y"}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input", stderrHas: "surrogate"},
		{name: "file lone low surrogate", setup: eventsFile(good, good, `{"execution_id":"1","transaction_id":"t","payload":"\udc00"}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input", stderrHas: "line 3"},
		{name: "file surrogate in transaction id", setup: eventsFile(`{"execution_id":"1","transaction_id":"\ud83d","payload":"p"}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input"},
		{name: "file unknown field", setup: eventsFile(`{"execution_id":"1","transaction_id":"t","payload":"p","payloadz":1}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input"},
		{name: "file missing payload", setup: eventsFile(`{"execution_id":"1","transaction_id":"t"}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input", stderrHas: "payload"},
		{name: "file payload not a string", setup: eventsFile(`{"execution_id":"1","transaction_id":"t","payload":5}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input"},
		{name: "file trailing data", setup: eventsFile(good + ` {}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input"},
		{name: "file bad id on the last line", setup: eventsFile(good, good, `{"execution_id":"no way","transaction_id":"t","payload":"p"}`), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input", stderrHas: "line 3"},
		{name: "file one event too large", setup: eventsFile(good, `{"execution_id":"1","transaction_id":"t","payload":"`+strings.Repeat("y", 2000)+`"}`), args: []string{"append", "--segment-max-bytes", "1500", "--file", "FILE"}, code: 4, class: "invalid_input"},
		{name: "file empty", setup: eventsFile(""), args: []string{"append", "--file", "FILE"}, code: 4, class: "invalid_input", stderrHas: "no event"},
		{name: "file one event not owned", setup: eventsFile(`{"execution_id":"`+execOwnedBy(t, 0, 2)+`","transaction_id":"t","payload":"p"}`, `{"execution_id":"`+owned1+`","transaction_id":"t","payload":"p"}`), args: []string{"append", "--shard-index", "0", "--shard-count", "2", "--file", "FILE"}, code: 6, class: "not_owner", owner: 1, stderrHas: "line 2"},
		{name: "not owner", args: []string{"append", "--shard-index", "0", "--shard-count", "2", "--execution-id", owned1, "--transaction-id", "t", "--payload", "p"}, code: 6, class: "not_owner", owner: 1},
		{name: "missing payload flag", args: []string{"append", "--execution-id", "1", "--transaction-id", "t"}, code: 2, class: "usage", stderrHas: "--payload"},
		{name: "missing execution id flag", args: []string{"append", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "unknown flag", args: []string{"append", "--execution-id", "1", "--transaction-id", "t", "--payload", "p", "--colour", "red"}, code: 2, class: "usage", stderrHas: "colour"},
		{name: "positional argument", args: []string{"append", "--execution-id", "1", "--transaction-id", "t", "--payload", "p", "extra"}, code: 2, class: "usage"},
		{name: "segment max over 15 MiB", args: []string{"append", "--segment-max-bytes", fmt.Sprint(15<<20 + 1), "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "segment max zero", args: []string{"scan", "--segment-max-bytes", "0"}, code: 2, class: "usage"},
		{name: "partial shard pair", args: []string{"append", "--shard-index", "1", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "index not below count", args: []string{"append", "--shard-index", "2", "--shard-count", "2", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "count not a number", args: []string{"append", "--shard-index", "0", "--shard-count", "two", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "count zero", args: []string{"append", "--shard-index", "0", "--shard-count", "0", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "count over the maximum", args: []string{"append", "--shard-index", "0", "--shard-count", "20000", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "env partial shard pair", env: []string{"NOETL_SHARD_INDEX=1"}, args: []string{"append", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "file and payload together", setup: eventsFile(good), args: []string{"append", "--file", "FILE", "--payload", "p"}, code: 2, class: "usage"},
		{name: "file missing", args: []string{"append", "--file", "/nonexistent/in.jsonl"}, code: 2, class: "usage"},
		{name: "dir and root disagree", args: []string{"scan", "--root", "/elsewhere"}, code: 2, class: "usage"},
		{name: "sync without a bucket", args: []string{"append", "--sync-to-bucket", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "bad bucket URL", args: []string{"append", "--bucket", "ftp://x", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 2, class: "usage"},
		{name: "scan limit too large", args: []string{"scan", "--limit", "100001"}, code: 2, class: "usage"},
		{name: "scan negative limit", args: []string{"scan", "--limit", "-1"}, code: 2, class: "usage"},
		{name: "scan negative after", args: []string{"scan", "--after", "-1"}, code: 2, class: "usage"},
		{name: "scan bad shard", args: []string{"scan", "--shard", "x"}, code: 2, class: "usage"},
		{name: "read bad execution id", args: []string{"read", "--execution-id", "a*b"}, code: 4, class: "invalid_input"},
		{name: "read missing execution id", args: []string{"read"}, code: 2, class: "usage"},
		{name: "tail bad consumer", args: []string{"tail", "--consumer", "bad name"}, code: 4, class: "invalid_input"},
		{name: "tail missing consumer", args: []string{"tail"}, code: 2, class: "usage"},
		{name: "ack beyond the tip", setup: withConsumer, needsStore: true, args: []string{"ack", "--consumer", "c", "--sequence", "3"}, code: 3, class: "invalid_state", stderrHas: "beyond the tip"},
		{name: "ack zero", setup: withConsumer, needsStore: true, args: []string{"ack", "--consumer", "c", "--sequence", "0"}, code: 3, class: "invalid_state"},
		{name: "ack unknown consumer", args: []string{"ack", "--consumer", "nobody", "--sequence", "1"}, code: 3, class: "invalid_state"},
		{name: "ack bad consumer", args: []string{"ack", "--consumer", "a/b", "--sequence", "1"}, code: 4, class: "invalid_input"},
		{name: "ack missing sequence", setup: withConsumer, needsStore: true, args: []string{"ack", "--consumer", "c"}, code: 2, class: "usage"},
		{name: "ack sequence not a number", setup: withConsumer, needsStore: true, args: []string{"ack", "--consumer", "c", "--sequence", "two"}, code: 2, class: "usage"},
		{name: "consumer-delete unknown", args: []string{"consumer-delete", "--consumer", "nobody"}, code: 3, class: "invalid_state"},
		{name: "locked store append", setup: lockShard, needsStore: true, args: []string{"append", "--execution-id", "1", "--transaction-id", "t", "--payload", "p"}, code: 3, class: "invalid_state", stderrHas: "locked"},
		{name: "locked store tail", setup: lockShard, needsStore: true, args: []string{"tail", "--consumer", "c"}, code: 3, class: "invalid_state"},
		{name: "locked store gc", setup: lockShard, needsStore: true, args: []string{"gc"}, code: 3, class: "invalid_state"},
		{name: "corrupt segment scan", setup: corruptFirstFrame, needsStore: true, args: []string{"scan"}, code: 5, class: "storage", stderrHas: "corrupt"},
		{name: "corrupt segment read", setup: corruptFirstFrame, needsStore: true, args: []string{"read", "--execution-id", "200"}, code: 5, class: "storage"},
		{name: "corrupt segment inspect", setup: corruptFirstFrame, needsStore: true, args: []string{"inspect"}, code: 5, class: "storage"},
		{name: "unknown command", args: []string{"apend"}, noDir: true, code: 2, class: "usage", stderrHas: "apend"},
		{name: "no command", args: []string{}, noDir: true, code: 2, class: "usage"},
		{name: "help of an unknown command", args: []string{"help", "nope"}, noDir: true, code: 2, class: "usage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := seeded(t)
			if tc.setup != nil {
				if cleanup := tc.setup(t, dir); cleanup != nil {
					defer cleanup()
				}
			}
			args := slices.Clone(tc.args)
			for i, a := range args {
				if a == "FILE" {
					args[i] = fileArg(dir)
				}
			}
			if !tc.noDir && len(args) > 0 {
				args = append([]string{args[0], "--dir", dir}, args[1:]...)
			}
			before := tree(t, filepath.Dir(dir))
			r := runCLI(t, tc.env, args...).want(t, tc.code, tc.class)
			sameTree(t, before, tree(t, filepath.Dir(dir)))
			if lines := strings.Count(r.stderr, "\n"); lines != 1 {
				t.Fatalf("stderr has %d lines, want 1:\n%s", lines, r)
			}
			if !strings.Contains(r.stderr, tc.stderrHas) {
				t.Fatalf("stderr lacks %q:\n%s", tc.stderrHas, r)
			}
			if tc.class == "not_owner" {
				if r.num(t, "owner_shard") != int64(tc.owner) {
					t.Fatalf("owner_shard:\n%s", r)
				}
			} else if _, has := r.obj["owner_shard"]; has {
				t.Fatalf("owner_shard outside not_owner:\n%s", r)
			}
			if tc.noDir || tc.needsStore {
				return
			}
			// The same input against a root that does not exist yet must
			// not create it (a writable open would, before the store
			// refuses the input).
			fresh := filepath.Join(filepath.Dir(dir), "fresh")
			for i, a := range args {
				if a == dir {
					args[i] = fresh
				}
			}
			runCLI(t, tc.env, args...).want(t, tc.code, tc.class)
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Fatalf("refused input created %s (%v)", fresh, err)
			}
		})
	}
}

// withConsumer creates consumer c (a pull) before the snapshot.
func withConsumer(t *testing.T, dir string) func() {
	ok(t, nil, "tail", "--dir", dir, "--consumer", "c")
	return nil
}

// lockShard holds shard 0's writer lock from this process, as a server
// would.
func lockShard(t *testing.T, dir string) func() {
	st, err := localseg.Open(localseg.ShardDir(dir, 0), localseg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return func() { st.Close() }
}

// corruptFirstFrame flips a byte inside the first frame's body (a frame
// with a successor: corruption, not a torn tail) and removes the
// checkpoint so every open replays.
func corruptFirstFrame(t *testing.T, dir string) func() {
	shard := localseg.ShardDir(dir, 0)
	path := filepath.Join(shard, localseg.SegmentFileName(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[localseg.HeaderSize+20] ^= 0x01
	writeFile(t, path, string(b))
	os.Remove(filepath.Join(shard, "checkpoint.json"))
	return nil
}

// TestPreValidationIsWhatWritesNothing is the RED control of "refused
// input writes nothing": the engine alone, handed the same bad event on a
// fresh root, refuses it too, but only after it has created the shard
// directory, its lock and its first segment. The command checks first.
func TestPreValidationIsWhatWritesNothing(t *testing.T) {
	root := filepath.Join(t.TempDir(), "fresh")
	r := runCLI(t, nil, "append", "--dir", root, "--execution-id", "a b", "--transaction-id", "t", "--payload", "p").want(t, 4, "invalid_input")
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("the command created %s:\n%s", root, r)
	}
	created, err := engineAppendCreates(root, localseg.Event{ExecutionID: "a b", TransactionID: "t", Payload: "p"})
	if err == nil {
		t.Fatal("the engine accepted a bad execution id")
	}
	if len(created) == 0 {
		t.Fatal("the engine alone wrote nothing: this control shows nothing")
	}
	t.Logf("the engine alone refused (%v) after creating %v", err, created)
}

// TestHelp: the top-level help lists every command, and every command's
// --help (and "help NAME") prints its usage and exits 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		r := runCLI(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: bucketlog COMMAND") {
			t.Fatalf("%v:\n%s", args, r)
		}
	}
	names := helpCommands(t)
	mine := []string{"append", "scan", "read", "tail", "ack", "consumer-delete", "inspect", "ship", "restore", "verify", "gc",
		"durable-eventlog-recovery", "durable-eventlog-affinity", "durable-eventlog-affinity-append", "durable-eventlog-affinity-read",
		"durable-eventlog-gc", "durable-eventlog-shared-gc", "durable-eventlog-shared"}
	for _, n := range mine {
		if !slices.Contains(names, n) {
			t.Errorf("the help does not list %s (it lists %v)", n, names)
		}
	}
	for _, n := range names {
		for _, args := range [][]string{{n, "--help"}, {n, "-h"}, {"help", n}} {
			r := runCLI(t, nil, args...)
			if r.code != 0 || !strings.Contains(r.stdout, "usage: bucketlog "+n) || r.stderr != "" {
				t.Errorf("%v: exit %d\nstdout: %.300s\nstderr: %s", args, r.code, r.stdout, r.stderr)
			}
		}
	}
}

// helpCommands parses the command names out of the top-level help.
func helpCommands(t *testing.T) []string {
	t.Helper()
	r := runCLI(t, nil, "help")
	var names []string
	line := regexp.MustCompile(`^  ([a-z][a-z-]+)\s{2,}\S`)
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) < 10 {
		t.Fatalf("parsed %v from the help:\n%s", names, r.stdout)
	}
	return names
}

// helpMentions checks that a command's --help names every top-level field
// of an output it printed (ship, restore, verify, gc, inspect list their
// report fields).
func helpMentions(t *testing.T, r result) {
	t.Helper()
	h := runCLI(t, nil, r.args[0], "--help").stdout
	for _, k := range r.keys {
		if !strings.Contains(h, k) {
			t.Errorf("bucketlog %s --help does not list the report field %q", r.args[0], k)
		}
	}
}

// TestEnvAndFlags: flags override the environment; the environment applies
// when no flag is given; warnings go to stderr, never stdout.
func TestEnvAndFlags(t *testing.T) {
	t.Run("segment max", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "s")
		env := []string{"NOETL_EHDB_EVENTLOG_SEGMENT_MAX_BYTES=400"}
		big := strings.Repeat("z", 500)
		runCLI(t, env, "append", "--dir", dir, "--execution-id", "1", "--transaction-id", "t", "--payload", big).want(t, 4, "invalid_input")
		ok(t, env, "append", "--dir", dir, "--segment-max-bytes", "4096", "--execution-id", "1", "--transaction-id", "t", "--payload", big)
	})
	t.Run("shard pair", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "s")
		env := []string{"NOETL_SHARD_INDEX=1", "NOETL_SHARD_COUNT=2"}
		owned0 := execOwnedBy(t, 0, 2)
		r := runCLI(t, env, "append", "--dir", dir, "--execution-id", owned0, "--transaction-id", "t", "--payload", "p").want(t, 6, "not_owner")
		if r.num(t, "owner_shard") != 0 {
			t.Fatalf("owner:\n%s", r)
		}
		ok(t, env, "append", "--dir", dir, "--shard-index", "0", "--shard-count", "2", "--execution-id", owned0, "--transaction-id", "t", "--payload", "p")
		ok(t, env, "append", "--dir", dir, "--execution-id", execOwnedBy(t, 1, 2), "--transaction-id", "t", "--payload", "p1")
		// One-shard commands default to the environment's shard; --shard
		// overrides it.
		if r := ok(t, env, "scan", "--dir", dir); r.records(t)[0]["payload"] != "p1" {
			t.Fatalf("scan of the env's shard:\n%s", r)
		}
		if r := ok(t, env, "scan", "--dir", dir, "--shard", "0"); r.records(t)[0]["execution_id"] != owned0 {
			t.Fatalf("scan --shard 0:\n%s", r)
		}
		// A flag pair overrides an invalid environment pair.
		bad := []string{"NOETL_SHARD_INDEX=5", "NOETL_SHARD_COUNT=2"}
		runCLI(t, bad, "append", "--dir", dir, "--execution-id", "1", "--transaction-id", "t", "--payload", "p").want(t, 2, "usage")
		// (In a new root: shard 0 of this one was written as 0 of 2, and a
		// store keeps its pair, issue 12 finding 13.)
		runCLI(t, bad, "append", "--dir", dir, "--shard-index", "0", "--shard-count", "1", "--execution-id", "1", "--transaction-id", "t", "--payload", "p").want(t, 2, "usage")
		ok(t, bad, "append", "--dir", filepath.Join(t.TempDir(), "one"), "--shard-index", "0", "--shard-count", "1", "--execution-id", "1", "--transaction-id", "t", "--payload", "p")
		ok(t, bad, "scan", "--dir", dir, "--shard", "0")
		runCLI(t, bad, "scan", "--dir", dir).want(t, 2, "usage")
	})
	t.Run("warnings on stderr", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "s")
		r := ok(t, []string{"NOETL_EHDB_EVENTLOG_GC=sometimes", "NOETL_EHDB_TAIL_INTERVAL_SECS=soon"}, "append", "--dir", dir, "--execution-id", "1", "--transaction-id", "t", "--payload", "p")
		if !strings.Contains(r.stderr, "NOETL_EHDB_EVENTLOG_GC") || !strings.Contains(r.stderr, "NOETL_EHDB_TAIL_INTERVAL_SECS") || strings.Contains(r.stdout, "NOETL") {
			t.Fatalf("warnings:\n%s", r)
		}
	})
}

// TestBackendSelector: only the exact token local_reference (trimmed)
// selects the JSONL driver, in DIR/shard-NNNN/eventlog.jsonl; anything else
// keeps the durable segment store; the two give the same outputs for the
// same operations (CHECKLIST §1.11, §1.12).
func TestBackendSelector(t *testing.T) {
	ops := func(t *testing.T, env []string, dir string) []string {
		var outs []string
		for _, args := range [][]string{
			{"append", "--execution-id", "100", "--transaction-id", "t1", "--payload", "<é>"},
			{"append", "--execution-id", "200", "--transaction-id", "t2", "--payload", "b"},
			{"scan"}, {"read", "--execution-id", "100"},
			{"tail", "--consumer", "c", "--limit", "1"}, {"ack", "--consumer", "c", "--sequence", "2"},
			{"tail", "--consumer", "c"}, {"consumer-delete", "--consumer", "c"},
		} {
			r := ok(t, env, append([]string{args[0], "--dir", dir}, args[1:]...)...)
			outs = append(outs, r.stdout)
		}
		runCLI(t, env, "ack", "--dir", dir, "--consumer", "c", "--sequence", "1").want(t, 3, "invalid_state")
		return outs
	}
	ref := filepath.Join(t.TempDir(), "ref")
	refOut := ops(t, []string{"NOETL_EHDB_EVENTLOG_BACKEND=local_reference"}, ref)
	shard := localseg.ShardDir(ref, 0)
	data, err := os.ReadFile(filepath.Join(shard, "eventlog.jsonl"))
	if err != nil || !strings.Contains(string(data), `"kind":"event"`) {
		t.Fatalf("the JSONL file: %v\n%s", err, data)
	}
	if segs, _ := filepath.Glob(filepath.Join(shard, "seg-*")); len(segs) != 0 {
		t.Fatalf("local_reference wrote segments: %v", segs)
	}
	dur := filepath.Join(t.TempDir(), "dur")
	durOut := ops(t, nil, dur)
	if !slices.Equal(refOut, durOut) {
		t.Fatalf("the drivers differ:\nlocal_reference %q\ndurable         %q", refOut, durOut)
	}
	runCLI(t, []string{"NOETL_EHDB_EVENTLOG_BACKEND=local_reference"}, "append", "--dir", ref, "--bucket", "mem://", "--execution-id", "1", "--transaction-id", "t", "--payload", "p").want(t, 2, "usage")

	for _, v := range []string{"LOCAL_REFERENCE", "local-reference", "local_reference_", "durable_segment", ""} {
		dir := filepath.Join(t.TempDir(), "d")
		r := ok(t, []string{"NOETL_EHDB_EVENTLOG_BACKEND=" + v}, "append", "--dir", dir, "--execution-id", "1", "--transaction-id", "t", "--payload", "p")
		if _, err := os.Stat(filepath.Join(localseg.ShardDir(dir, 0), localseg.SegmentFileName(1))); err != nil {
			t.Errorf("%q did not keep the durable store: %v", v, err)
		}
		if _, err := os.Stat(filepath.Join(localseg.ShardDir(dir, 0), "eventlog.jsonl")); err == nil {
			t.Errorf("%q selected local_reference", v)
		}
		if v != "" && v != "durable_segment" && !strings.Contains(r.stderr, "NOETL_EHDB_EVENTLOG_BACKEND") {
			t.Errorf("%q: no warning on stderr:\n%s", v, r)
		}
	}
	// Only the exact token selects it (the README's Configuration table; issue 12, finding 13): with
	// blanks around it the durable store is kept, with a warning.
	dir := filepath.Join(t.TempDir(), "d")
	r := ok(t, []string{"NOETL_EHDB_EVENTLOG_BACKEND= local_reference "}, "append", "--dir", dir, "--execution-id", "1", "--transaction-id", "t", "--payload", "p")
	if _, err := os.Stat(filepath.Join(localseg.ShardDir(dir, 0), "eventlog.jsonl")); err == nil {
		t.Errorf("the token with blanks selected local_reference")
	}
	if _, err := os.Stat(filepath.Join(localseg.ShardDir(dir, 0), localseg.SegmentFileName(1))); err != nil || !strings.Contains(r.stderr, "NOETL_EHDB_EVENTLOG_BACKEND") {
		t.Errorf("the token with blanks: durable store %v, warning in\n%s", err, r.stderr)
	}
}

// readAll is a small helper for files the tests inspect.
func readAll(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
