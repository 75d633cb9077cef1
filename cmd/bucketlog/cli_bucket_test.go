package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/internal/emulator"
	"github.com/bucketlog/bucketlog/localseg"
)

func ownerOf(id string, count int) int { return affinity.ShardFor(id, count) }

// engineAppendCreates opens the engine on a fresh root, appends ev, and
// lists the files it left (the RED control of pre-validation).
func engineAppendCreates(root string, ev localseg.Event) ([]string, error) {
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: root, NoBackground: true})
	if err != nil {
		return nil, err
	}
	_, aerr := l.Append(context.Background(), ev)
	l.Close()
	var files []string
	filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	return files, aerr
}

// fileBucket is a file:// bucket in a fresh directory (gocloud's fileblob:
// development only, but it is shared across processes, which a test of a
// command needs).
func fileBucket(t *testing.T) (url, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "bucket")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return "file://" + dir, dir
}

// appendN appends n events to shard 0 of dir in one --file batch.
func appendN(t *testing.T, env []string, dir string, from, n int, extra ...string) {
	t.Helper()
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, `{"execution_id":"%d","transaction_id":"t-%d","payload":"event %d <&>"}`+"\n", 100+i%3, i, i)
	}
	file := writeFile(t, filepath.Join(t.TempDir(), "batch.jsonl"), b.String())
	ok(t, env, append([]string{"append", "--dir", dir, "--file", file}, extra...)...)
}

// TestBucketCommands: ship, restore, verify, read from the bucket and gc's
// refusals across processes on a file:// bucket (CHECKLIST §3.4–3.6, §3.14).
func TestBucketCommands(t *testing.T) {
	bucket, bdir := fileBucket(t)
	a := filepath.Join(t.TempDir(), "a")
	appendN(t, nil, a, 0, 3)

	r := ok(t, nil, "ship", "--dir", a, "--bucket", bucket, "--seal-active")
	r.wantKeys(t, "action", "shard", "sealed", "upload", "tail_batches", "tail_records", "tail_bytes", "shipped_through", "tip", "segments")
	up := r.obj["upload"].(map[string]any)
	if r.obj["sealed"] != true || up["segments_uploaded"] != json.Number("1") || r.num(t, "shipped_through") != 3 || r.num(t, "tip") != 3 {
		t.Fatalf("ship:\n%s", r)
	}
	helpMentions(t, r)
	if got := readAll(t, filepath.Join(localseg.ShardDir(a, 0), "bucket.json")); !strings.Contains(got, bdir) {
		t.Fatalf("bucket.json: %s", got)
	}
	// An append with the bucket ships its tail before it exits.
	ok(t, nil, "append", "--dir", a, "--bucket", bucket, "--execution-id", "7", "--transaction-id", "t", "--payload", "the tail")
	tails, _ := filepath.Glob(filepath.Join(bdir, "noetl.ehdb.tail.00000000.0000000000000004.0000000000000004"))
	if len(tails) != 1 {
		entries, _ := os.ReadDir(bdir)
		t.Fatalf("no tail object for sequence 4: %v", entries)
	}

	r = ok(t, nil, "verify", "--bucket", bucket)
	r.wantKeys(t, "action", "ok", "shards_found", "shards", "objects", "bytes", "seconds", "problems")
	if r.obj["ok"] != true || len(r.obj["problems"].([]any)) != 0 || fmt.Sprint(r.obj["shards_found"]) != "[0]" {
		t.Fatalf("verify:\n%s", r)
	}
	helpMentions(t, r)

	b := filepath.Join(t.TempDir(), "b")
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", b)
	if r.obj["action"] != "restore" || r.num(t, "first_sequence") != 1 || r.num(t, "last_sequence") != 4 ||
		r.num(t, "segments") != 1 || r.num(t, "tail_objects") != 1 || r.num(t, "objects") < 2 || r.num(t, "bytes") == 0 {
		t.Fatalf("restore:\n%s", r)
	}
	if !strings.Contains(r.stderr, "restore: shard 0: done") {
		t.Fatalf("no progress line:\n%s", r)
	}
	helpMentions(t, r)
	wantScan := ok(t, nil, "scan", "--dir", a).stdout
	if got := ok(t, nil, "scan", "--dir", b).stdout; got != wantScan {
		t.Fatalf("the restored shard differs:\n got %s\nwant %s", got, wantScan)
	}
	before := tree(t, b)
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", b).want(t, 3, "invalid_state")
	sameTree(t, before, tree(t, b))
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", b).want(t, 3, "invalid_state")

	// A shard the bucket holds nothing of: restore refuses unless
	// --allow-empty; read answers empty from the bucket.
	empty := filepath.Join(t.TempDir(), "e")
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", empty, "--shard", "1").want(t, 3, "invalid_state")
	if r = ok(t, nil, "restore", "--bucket", bucket, "--dir", empty, "--shard", "1", "--allow-empty"); r.obj["empty"] != true {
		t.Fatalf("restore --allow-empty:\n%s", r)
	}

	// read from the bucket when the directory does not hold the shard.
	c := filepath.Join(t.TempDir(), "c")
	r = ok(t, nil, "read", "--dir", c, "--bucket", bucket, "--execution-id", "7")
	if r.obj["served_by"] != "non_owner_cold_load" || r.num(t, "returned") != 1 || r.records(t)[0]["payload"] != "the tail" {
		t.Fatalf("read from the bucket:\n%s", r)
	}
	if _, err := os.Stat(c); !os.IsNotExist(err) {
		t.Fatalf("a read from the bucket created %s", c)
	}
	// With the environment's bucket.
	r = ok(t, []string{"BUCKETLOG_BUCKET_URL=" + bucket}, "read", "--dir", c, "--execution-id", "100")
	if r.obj["served_by"] != "non_owner_cold_load" || r.num(t, "returned") != 1 || r.records(t)[0]["transaction_id"] != "t-0" {
		t.Fatalf("read with BUCKETLOG_BUCKET_URL:\n%s", r)
	}

	// gc on a store that ships needs its bucket; shared GC needs CAS.
	before = tree(t, a)
	runCLI(t, nil, "gc", "--dir", a).want(t, 2, "usage")
	runCLI(t, nil, "gc", "--dir", a, "--bucket", bucket).want(t, 2, "usage")
	runCLI(t, nil, "ship", "--dir", a).want(t, 2, "usage")
	sameTree(t, before, tree(t, a))

	// A flipped byte in a segment object: verify lists it (exit 1), a
	// restore refuses it (exit 5).
	seg := filepath.Join(bdir, "noetl.ehdb.seg.00000000.0000000000000001")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x20
	writeFile(t, seg, string(data))
	r = runCLI(t, nil, "verify", "--bucket", bucket).want(t, 1, "invariant")
	if probs := r.obj["problems"].([]any); len(probs) == 0 || r.obj["ok"] != false {
		t.Fatalf("verify of a corrupt object:\n%s", r)
	}
	d := filepath.Join(t.TempDir(), "d")
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", d).want(t, 5, "storage")
}

// TestInspect: a torn tail is reported (exit 0) and changes nothing;
// corruption is exit 5 with the report (CHECKLIST §1.7, §1.8).
func TestInspect(t *testing.T) {
	dir := seeded(t)
	seg := filepath.Join(localseg.ShardDir(dir, 0), localseg.SegmentFileName(1))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Half a header after the last frame: a torn tail.
	var end int
	for off := 0; ; {
		_, n, err := localseg.DecodeFrame(data[off:])
		if err != nil {
			end = off
			break
		}
		off += n
	}
	torn := append(data[:end:end], 0x01, 0x00, 0xdb, 0xe5, 0x40)
	writeFile(t, seg, string(torn))
	before := tree(t, dir)
	r := ok(t, nil, "inspect", "--dir", dir)
	if r.num(t, "torn_tail_bytes") == 0 || len(r.obj["problems"].([]any)) != 0 {
		t.Fatalf("inspect of a torn tail:\n%s", r)
	}
	helpMentions(t, r)
	sameTree(t, before, tree(t, dir))
	// The owner's next writable open truncates it and continues.
	if r = ok(t, nil, "append", "--dir", dir, "--execution-id", "1", "--transaction-id", "t", "--payload", "p"); r.num(t, "global_sequence") != 3 {
		t.Fatalf("append after the torn tail:\n%s", r)
	}
	if r = ok(t, nil, "inspect", "--dir", dir); r.num(t, "torn_tail_bytes") != 0 {
		t.Fatalf("inspect after the repair:\n%s", r)
	}
}

// s3Emulator starts gofakes3 in this process and creates a bucket; its
// URL needs no credentials (anonymous requests).
func s3Emulator(t *testing.T) (*emulator.S3, string) {
	t.Helper()
	e, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBucket("cli"); err != nil {
		t.Fatal(err)
	}
	return e, e.URL("cli")
}

// TestGCOnS3: consumed segments are reclaimed locally and in the bucket,
// behind the watermark, by separate processes; then verify and restore
// agree with the retained log (CHECKLIST §5.2, §6.2).
func TestGCOnS3(t *testing.T) {
	e, bucket := s3Emulator(t)
	a := filepath.Join(t.TempDir(), "a")
	appendN(t, nil, a, 0, 40, "--segment-max-bytes", "300")
	ok(t, nil, "tail", "--dir", a, "--consumer", "proj", "--limit", "1")
	ok(t, nil, "ack", "--dir", a, "--consumer", "proj", "--sequence", "30")
	// No bucket yet: a plain local reclaim would go; ship first so the
	// shared path runs.
	ok(t, nil, "ship", "--dir", a, "--bucket", bucket, "--seal-active")

	r := ok(t, nil, "gc", "--dir", a, "--bucket", bucket)
	r.wantKeys(t, "action", "shard", "outcome", "plan", "local", "shared", "segments_before", "segments_after", "base", "tip")
	if r.obj["outcome"] != "reclaimed" || r.num(t, "segments_after") >= r.num(t, "segments_before") || r.num(t, "base") < 2 || r.num(t, "base") > 31 {
		t.Fatalf("gc:\n%s", r)
	}
	helpMentions(t, r)
	base := r.num(t, "base")
	r = ok(t, nil, "scan", "--dir", a, "--limit", "0")
	if r.num(t, "base") != base || r.num(t, "record_count") != 40-base+1 {
		t.Fatalf("scan after gc:\n%s", r)
	}
	if r = ok(t, nil, "gc", "--dir", a, "--bucket", bucket); r.obj["outcome"] != "noop" {
		t.Fatalf("second gc:\n%s", r)
	}
	if r = ok(t, nil, "verify", "--bucket", bucket); r.obj["ok"] != true {
		t.Fatalf("verify after gc:\n%s", r)
	}
	b := filepath.Join(t.TempDir(), "b")
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", b)
	// One meaning of base everywhere: the first retained sequence.
	if r.num(t, "base") != base || r.num(t, "watermark") != base-1 || r.num(t, "last_sequence") != 40 {
		t.Fatalf("restore after gc:\n%s", r)
	}
	if v := ok(t, nil, "verify", "--bucket", bucket); !strings.Contains(v.stdout, fmt.Sprintf(`"base":%d,"watermark":%d`, base, base-1)) {
		t.Fatalf("verify after gc does not say base %d:\n%s", base, v)
	}
	// The progress line's object count is the report's.
	if want := fmt.Sprintf("done: %d/%d objects", r.num(t, "objects"), r.num(t, "objects")); !strings.Contains(r.stderr, want) {
		t.Fatalf("the restore's progress line does not say %q:\n%s", want, r)
	}
	if got, want := ok(t, nil, "scan", "--dir", b).stdout, ok(t, nil, "scan", "--dir", a).stdout; got != want {
		t.Fatalf("the restored shard differs:\n got %s\nwant %s", got, want)
	}

	// The production-shaped URL signs its requests with credentials from
	// the environment.
	signed := e.URLSigned("cli")
	env := []string{}
	for k, v := range emulator.S3Env() {
		env = append(env, k+"="+v)
	}
	if r = ok(t, env, "verify", "--bucket", signed); r.obj["ok"] != true {
		t.Fatalf("verify with a signed URL:\n%s", r)
	}
	// Keep-last-N without consumers, over the environment's bucket.
	c := filepath.Join(t.TempDir(), "c")
	appendN(t, nil, c, 0, 30, "--segment-max-bytes", "300", "--shard-index", "0", "--shard-count", "1")
	envB := []string{"BUCKETLOG_BUCKET_URL=" + e.URL("cli2")}
	if err := e.CreateBucket("cli2"); err != nil {
		t.Fatal(err)
	}
	ok(t, envB, "ship", "--dir", c, "--seal-active")
	if r = ok(t, envB, "gc", "--dir", c); r.obj["outcome"] != "noop" {
		t.Fatalf("gc without interest:\n%s", r)
	}
	if r = ok(t, envB, "gc", "--dir", c, "--max-retained-segments", "3"); r.obj["outcome"] != "reclaimed" || r.num(t, "segments_after") != 3 {
		t.Fatalf("gc keep-last-3:\n%s", r)
	}
	runCLI(t, envB, "gc", "--dir", c, "--max-retained-segments", "0").want(t, 2, "usage")
}

// refusingProxy forwards to an S3 emulator and, while refuse is set,
// answers every write with 403 AccessDenied (not retried by the SDK).
type refusingProxy struct {
	srv    *httptest.Server
	refuse atomic.Bool
}

func newRefusingProxy(t *testing.T, endpoint string) *refusingProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &refusingProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.refuse.Load() && (r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodDelete) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>refused by the test</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *refusingProxy) url(bucket string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=%s&anonymous=true", bucket, p.srv.URL, emulator.Region)
}

// TestSyncToBucket: a synchronous append returns once the bucket holds
// it; with the bucket refusing writes it exits 7 with its sequence, the
// event stays durable locally and ships once the bucket recovers
// (CHECKLIST §4.13).
func TestSyncToBucket(t *testing.T) {
	e, _ := s3Emulator(t)
	p := newRefusingProxy(t, e.Endpoint())
	bucket := p.url("cli")
	dir := filepath.Join(t.TempDir(), "s")

	r := ok(t, nil, "append", "--dir", dir, "--bucket", bucket, "--sync-to-bucket", "--execution-id", "1", "--transaction-id", "t", "--payload", "p1")
	if r.num(t, "global_sequence") != 1 {
		t.Fatalf("sync append:\n%s", r)
	}
	if r = ok(t, nil, "verify", "--bucket", e.URL("cli")); r.obj["shards"].([]any)[0].(map[string]any)["through"] != json.Number("1") {
		t.Fatalf("the bucket does not hold the synchronous append:\n%s", r)
	}

	p.refuse.Store(true)
	r = runCLI(t, nil, "append", "--dir", dir, "--bucket", bucket, "--sync-to-bucket", "--sync-wait", "500ms",
		"--execution-id", "1", "--transaction-id", "t2", "--payload", "p2").want(t, 7, "not_in_bucket")
	r.wantKeys(t, "action", "execution_id", "global_sequence", "byte_len", "created_stream", "log_record_count", "error", "class")
	if r.num(t, "global_sequence") != 2 || !strings.Contains(r.obj["error"].(string), "same transaction id is safe") {
		t.Fatalf("not in the bucket:\n%s", r)
	}
	// Retried with its transaction id: not written again, still exit 7.
	r = runCLI(t, nil, "append", "--dir", dir, "--bucket", bucket, "--sync-to-bucket", "--sync-wait", "500ms",
		"--execution-id", "1", "--transaction-id", "t2", "--payload", "p2").want(t, 7, "not_in_bucket")
	if r.num(t, "global_sequence") != 2 || r.obj["duplicate"] != true {
		t.Fatalf("retry while the bucket refuses:\n%s", r)
	}
	if r = ok(t, nil, "scan", "--dir", dir, "--limit", "0"); r.num(t, "record_count") != 2 {
		t.Fatalf("the event is not durable locally:\n%s", r)
	}

	p.refuse.Store(false)
	if r = ok(t, nil, "ship", "--dir", dir, "--bucket", bucket); r.num(t, "shipped_through") != 2 {
		t.Fatalf("ship after the bucket recovered:\n%s", r)
	}
	r = ok(t, nil, "append", "--dir", dir, "--bucket", bucket, "--sync-to-bucket", "--execution-id", "1", "--transaction-id", "t2", "--payload", "p2")
	if r.num(t, "global_sequence") != 2 || r.obj["duplicate"] != true {
		t.Fatalf("retry once the bucket holds it:\n%s", r)
	}
	b := filepath.Join(t.TempDir(), "b")
	if r = ok(t, nil, "restore", "--dir", b, "--bucket", e.URL("cli")); r.num(t, "last_sequence") != 2 {
		t.Fatalf("restore:\n%s", r)
	}
	runCLI(t, nil, "append", "--dir", dir, "--sync-wait", "1s", "--execution-id", "1", "--transaction-id", "t", "--payload", "p").want(t, 2, "usage")
}

// TestDrives: every drive's happy path exits 0 with its report, and each
// refuses bad input with exit 2 (CHECKLIST §1.13, §2.7, §3.9, §5.9, §6.2).
func TestDrives(t *testing.T) {
	fresh := func() string { return filepath.Join(t.TempDir(), "root") }
	used := func() string {
		d := t.TempDir()
		writeFile(t, filepath.Join(d, "keep"), "x")
		return d
	}
	type driveCase struct {
		args   []string
		holds  string // the report's verdict field
		refuse [][]string
	}
	cases := []driveCase{
		{[]string{"durable-eventlog-recovery", "--root", fresh()}, "recovered",
			[][]string{{"durable-eventlog-recovery", "--root", used()}, {"durable-eventlog-recovery"}, {"durable-eventlog-recovery", "--root", fresh(), "--consumer", "bad name"}}},
		{[]string{"durable-eventlog-affinity", "--root", fresh(), "--shard-count", "3"}, "single_writer_holds",
			[][]string{{"durable-eventlog-affinity", "--root", fresh(), "--shard-count", "1"}, {"durable-eventlog-affinity", "--root", used()}}},
		{[]string{"durable-eventlog-gc", "--root", fresh()}, "gc_holds",
			[][]string{{"durable-eventlog-gc", "--root", fresh(), "--events", "3"}, {"durable-eventlog-gc", "--root", fresh(), "--segment-max-bytes", fmt.Sprint(16 << 20)}}},
		{[]string{"durable-eventlog-shared-gc", "--root", fresh()}, "shared_gc_holds",
			[][]string{{"durable-eventlog-shared-gc", "--root", fresh(), "--shard-count", "1"}, {"durable-eventlog-shared-gc", "--root", fresh(), "--bucket", "mem://"}}},
		{[]string{"durable-eventlog-shared", "--root", fresh()}, "shared_tier_holds",
			[][]string{{"durable-eventlog-shared", "--root", fresh(), "--shard-count", "1"}, {"durable-eventlog-shared", "--root", used()}}},
	}
	for _, tc := range cases {
		t.Run(tc.args[0], func(t *testing.T) {
			r := ok(t, nil, tc.args...)
			if r.obj[tc.holds] != true {
				t.Fatalf("the drive does not hold:\n%s", r)
			}
			for _, args := range tc.refuse {
				runCLI(t, nil, args...).want(t, 2, "usage")
			}
		})
	}
	// By default the pool drives run on an in-memory bucket (the command
	// links no emulator); over --bucket they run on S3 as before.
	t.Run("shared drives over S3", func(t *testing.T) {
		e, _ := s3Emulator(t)
		for _, tc := range []struct{ drive, holds string }{
			{"durable-eventlog-shared-gc", "shared_gc_holds"},
			{"durable-eventlog-shared", "shared_tier_holds"},
		} {
			name, err := e.NewBucket()
			if err != nil {
				t.Fatal(err)
			}
			if r := ok(t, nil, tc.drive, "--root", fresh(), "--bucket", e.URL(name)); r.obj[tc.holds] != true {
				t.Fatalf("%s over S3 does not hold:\n%s", tc.drive, r)
			}
		}
	})
	t.Run("shared over a file bucket", func(t *testing.T) {
		bucket, _ := fileBucket(t)
		r := ok(t, nil, "durable-eventlog-shared", "--root", fresh(), "--shard-count", "3", "--bucket", bucket)
		if r.obj["shared_tier_holds"] != true {
			t.Fatalf("%s", r)
		}
		// The bucket now holds the pool's shards: a second run refuses it.
		runCLI(t, nil, "durable-eventlog-shared", "--root", fresh(), "--bucket", bucket).want(t, 2, "usage")
	})
	t.Run("affinity one-shots", func(t *testing.T) {
		root := fresh()
		id := execOwnedBy(t, 1, 2)
		r := ok(t, nil, "durable-eventlog-affinity-append", "--root", root, "--shard-index", "1", "--shard-count", "2",
			"--execution-id", id, "--transaction-id", "t", "--payload", "p")
		if r.obj["decision"] != "owned" || r.num(t, "global_sequence") != 1 {
			t.Fatalf("owned append:\n%s", r)
		}
		before := tree(t, root)
		r = runCLI(t, nil, "durable-eventlog-affinity-append", "--root", root, "--shard-index", "0", "--shard-count", "2",
			"--execution-id", id, "--transaction-id", "t", "--payload", "p").want(t, 6, "not_owner")
		if r.obj["decision"] != "not_owner" || r.num(t, "owner_shard") != 1 || strings.Count(r.stdout, `"owner_shard"`) != 1 {
			t.Fatalf("refused append:\n%s", r)
		}
		after := tree(t, root)
		for k := range after {
			if _, had := before[k]; !had && !strings.HasPrefix(k, "shard-0000") {
				t.Fatalf("a refused append created %s", k)
			}
		}
		if files, _ := filepath.Glob(filepath.Join(root, "shard-0000", "seg-*")); len(files) > 0 {
			if r := ok(t, nil, "scan", "--dir", root, "--shard", "0"); r.obj["exists"] != false {
				t.Fatalf("the refused event was written:\n%s", r)
			}
		}
		r = ok(t, nil, "durable-eventlog-affinity-read", "--root", root, "--shard-index", "0", "--shard-count", "2", "--execution-id", id)
		if r.obj["served_by"] != "non_owner_cold_load" || r.num(t, "returned") != 1 {
			t.Fatalf("cold read:\n%s", r)
		}
		r = ok(t, nil, "durable-eventlog-affinity-read", "--root", root, "--shard-index", "1", "--shard-count", "2", "--execution-id", id)
		if r.obj["served_by"] != "owner_resident" {
			t.Fatalf("owner read:\n%s", r)
		}
		runCLI(t, nil, "durable-eventlog-affinity-read", "--root", root, "--shard-index", "1", "--execution-id", id).want(t, 2, "usage")
		runCLI(t, nil, "durable-eventlog-affinity-read", "--root", root, "--shard-index", "1", "--shard-count", "2").want(t, 2, "usage")
		runCLI(t, nil, "durable-eventlog-affinity-append", "--root", root, "--shard-index", "0", "--shard-count", "2",
			"--execution-id", "x y", "--transaction-id", "t", "--payload", "p").want(t, 4, "invalid_input")
	})
}

// TestRestoreGap: a restore stops at a hole in the bucket's segments and
// names it (exit 3); --allow-partial keeps the prefix (CHECKLIST §3.14).
// verify lists the same hole, and checks the shards it is told to.
func TestRestoreGap(t *testing.T) {
	bucket, bdir := fileBucket(t)
	a := filepath.Join(t.TempDir(), "a")
	appendN(t, nil, a, 0, 30, "--segment-max-bytes", "300")
	r := ok(t, nil, "ship", "--dir", a, "--bucket", bucket, "--seal-active")
	if n := r.obj["upload"].(map[string]any)["segments_uploaded"].(json.Number); n == "1" || n == "0" {
		t.Fatalf("too few segments for a gap:\n%s", r)
	}
	if err := os.Remove(filepath.Join(bdir, "noetl.ehdb.seg.00000000.0000000000000002")); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(t.TempDir(), "b")
	r = runCLI(t, nil, "restore", "--bucket", bucket, "--dir", b).want(t, 3, "invalid_state")
	if !strings.Contains(r.stderr, "gap") && !strings.Contains(r.stderr, "missing") {
		t.Fatalf("the refusal does not name the hole:\n%s", r)
	}
	if _, err := os.Stat(localseg.ShardDir(b, 0)); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s", localseg.ShardDir(b, 0))
	}
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", b, "--allow-partial")
	last := r.num(t, "last_sequence")
	if last < 1 || last >= 30 || len(r.obj["gaps"].([]any)) == 0 {
		t.Fatalf("partial restore:\n%s", r)
	}
	if r = ok(t, nil, "scan", "--dir", b, "--limit", "0"); r.num(t, "record_count") != last {
		t.Fatalf("the kept prefix:\n%s", r)
	}

	r = runCLI(t, nil, "verify", "--bucket", bucket, "--shards", "0,1").want(t, 1, "invariant")
	shards := r.obj["shards"].([]any)
	if len(shards) != 2 || shards[1].(map[string]any)["present"] != false {
		t.Fatalf("verify --shards 0,1:\n%s", r)
	}
	// A shard asked for that holds nothing is a problem, not ok.
	if r = runCLI(t, nil, "verify", "--bucket", bucket, "--shards", "1").want(t, 1, "invariant"); len(r.obj["shards"].([]any)) != 1 || !strings.Contains(r.stdout, `"class":"missing"`) {
		t.Fatalf("verify --shards 1:\n%s", r)
	}
	runCLI(t, nil, "verify", "--bucket", bucket, "--shard-count", "3", "--shards", "1").want(t, 2, "usage")
	runCLI(t, nil, "verify", "--bucket", bucket, "--shards", "0,x").want(t, 2, "usage")
	runCLI(t, nil, "verify").want(t, 2, "usage")
}
