package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

// testCLI is a cli over buffers and a fixed environment.
func testCLI(env map[string]string) (*cli, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	c := &cli{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		getenv: func(k string) string { return env[k] },
		log:    slog.New(slog.NewTextHandler(&stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), name: "selfcheck"}
	return c, &stdout, &stderr
}

// runWithEnv runs the command in process with env as its whole
// environment.
func runWithEnv(t *testing.T, env map[string]string, args ...string) (int, map[string]any, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, func(k string) string { return env[k] })
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v: stdout %q: %v", args, stdout.String(), err)
	}
	return code, out, stdout.String(), stderr.String()
}

// TestSelfcheckConfig: the defaults, the environment, flags over the
// environment, and an invalid shard pair.
func TestSelfcheckConfig(t *testing.T) {
	code, out, _, _ := runWithEnv(t, nil, "selfcheck", "config")
	if code != 0 || out["storage_backend"] != "durable_segment" || out["authoritative"] != true || out["shard_count"] != 1.0 ||
		out["segment_max_bytes"] != float64(bucketlog.DefaultSegmentMaxBytes) || out["seal_max_age"] != "15m0s" ||
		out["tail_interval"] != "15s" || out["bucket_configured"] != false || out["secret_free"] != true {
		t.Fatalf("defaults: %d %v", code, out)
	}
	if gc := out["gc"].(map[string]any); gc["enabled"] != false || gc["min_retained_segments"] != 2.0 {
		t.Fatalf("default gc: %v", gc)
	}

	env := map[string]string{
		EnvShardIndex: "1", EnvShardCount: "4",
		EnvSegmentMaxBytes: "65536", EnvSealMaxAge: "60",
		EnvTailInterval: "5", EnvGC: "consumer_ack", EnvGCInterval: "30",
		EnvGCMaxRetained: "7", EnvBucketURL: "mem://from-env",
		EnvTailCleanup: "sometimes", // unknown: kept on, with a warning
	}
	code, out, _, stderr := runWithEnv(t, env, "selfcheck", "config")
	gc := out["gc"].(map[string]any)
	if code != 0 || out["shard_index"] != 1.0 || out["shard_count"] != 4.0 || out["segment_max_bytes"] != 65536.0 ||
		out["seal_max_age"] != "1m0s" || out["tail_interval"] != "5s" || out["bucket_url"] != "mem://from-env" ||
		out["bucket_url_ok"] != true || out["tail_replication"] != true || out["tail_cleanup"] != true ||
		gc["enabled"] != true || gc["interval"] != "30s" || gc["max_retained_segments"] != 7.0 ||
		!strings.Contains(out["loss_window"].(string), "5s") {
		t.Fatalf("environment: %d %v", code, out)
	}
	if ws, _ := out["warnings"].([]any); len(ws) != 1 || !strings.Contains(ws[0].(string), EnvTailCleanup) || !strings.Contains(stderr, EnvTailCleanup) {
		t.Fatalf("the unknown value's warning: %v / stderr %q", out["warnings"], stderr)
	}

	code, out, _, _ = runWithEnv(t, env, "selfcheck", "config", "--shard-index", "2", "--shard-count", "3",
		"--segment-max-bytes", "4096", "--seal-max-age", "0", "--tail-interval", "250ms", "--bucket", "mem://from-flag", "--sync-to-bucket")
	if code != 0 || out["shard_index"] != 2.0 || out["shard_count"] != 3.0 || out["segment_max_bytes"] != 4096.0 ||
		out["seal_max_age"] != "never" || out["tail_interval"] != "250ms" || out["bucket_url"] != "mem://from-flag" ||
		out["sync_to_bucket"] != true {
		t.Fatalf("flags over the environment: %d %v", code, out)
	}

	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"partial pair in the environment": {map[string]string{EnvShardIndex: "1"}, nil},
		"index beyond count":              {nil, []string{"--shard-index", "3", "--shard-count", "3"}},
		"segment over 15 MiB":             {nil, []string{"--segment-max-bytes", "16777216"}},
		"sync without a bucket":           {nil, []string{"--sync-to-bucket"}},
	} {
		code, out, _, _ := runWithEnv(t, tc.env, append([]string{"selfcheck", "config"}, tc.args...)...)
		if code != 2 || out["class"] != "usage" || out["suite"] != "bucketlog-config-selfcheck" {
			t.Errorf("%s: %d %v", name, code, out)
		}
	}
	if code, out, _, _ := runWithEnv(t, nil, "selfcheck"); code != 2 || out["class"] != "usage" {
		t.Errorf("selfcheck without a check: %d %v", code, out)
	}
}

// TestSelfcheckConfigSecretFree: a bucket URL with credentials, from the
// environment or a flag, never prints them — neither on stdout nor on
// stderr, neither in bucket_url nor in an open error.
func TestSelfcheckConfigSecretFree(t *testing.T) {
	secrets := []string{"AKIDUSER42", "pa55w0rdXYZ", "tok3nSECRET", "s1gnatureQQ"}
	urls := []string{
		"s3://AKIDUSER42:pa55w0rdXYZ@bucket?region=us-east-1&session_token=tok3nSECRET",
		"s3://bucket?region=us-east-1&endpoint=http://127.0.0.1:1&X-Amz-Signature=s1gnatureQQ&aws_secret_key=pa55w0rdXYZ",
		"gs://AKIDUSER42:pa55w0rdXYZ@bucket?access_token=tok3nSECRET",
		"mem://AKIDUSER42:pa55w0rdXYZ@named",
		"s3://AKIDUSER42:pa55w0rdXYZ@bu%zzcket", // not a URL: redacted whole
	}
	for _, u := range urls {
		for _, how := range []string{"env", "flag"} {
			env, args := map[string]string{}, []string{"selfcheck", "config"}
			if how == "env" {
				env[EnvBucketURL] = u
			} else {
				args = append(args, "--bucket", u)
			}
			_, out, stdout, stderr := runWithEnv(t, env, args...)
			for _, s := range secrets {
				if strings.Contains(stdout, s) || strings.Contains(stderr, s) {
					t.Errorf("%s %q: the secret %q was printed:\nstdout: %s\nstderr: %s", how, u, s, stdout, stderr)
				}
			}
			if bu, _ := out["bucket_url"].(string); bu == "" || bu == u || out["secret_free"] != true {
				t.Errorf("%s %q: bucket_url %q", how, u, bu)
			}
		}
	}
}

// TestSelfcheckDurable: in a temporary directory (removed afterwards), on
// a populated shard given by --dir (its own 3 events replay after the
// existing ones), on a locked shard, and under local_reference.
func TestSelfcheckDurable(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, out, _, stderr := runWithEnv(t, nil, "selfcheck", "durable-eventlog")
	if code != 0 || out["ok"] != true || out["durable_replay_ok"] != true || out["durable_replay_records"] != 3.0 ||
		out["suite"] != "ehdb-durable-eventlog-selfcheck" || out["storage_backend"] != "durable_segment" || out["first_sequence"] != 1.0 {
		t.Fatalf("temporary: %d %v %s", code, out, stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the temporary directory was left behind: %v", left)
	}

	// A populated shard of a pool: shard 1 of 2 with 5 events.
	dir := t.TempDir()
	l, err := bucketlog.Open(context.Background(), bucketlog.Options{Dir: dir, ShardIndex: 1, ShardCount: 2, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := l.Append(context.Background(), localseg.Event{ExecutionID: selfcheckExecution(l.Ownership(), 9), TransactionID: "t" + strings.Repeat("p", i), Payload: strings.Repeat("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// While the shard is held by its writer, the check is refused.
	code, out, _, _ = runWithEnv(t, nil, "selfcheck", "durable-eventlog", "--dir", dir, "--shard-index", "1", "--shard-count", "2")
	if code != 3 || out["class"] != "invalid_state" {
		t.Errorf("locked shard: %d %v", code, out)
	}
	l.Close()
	env := map[string]string{EnvShardIndex: "1", EnvShardCount: "2"}
	code, out, _, _ = runWithEnv(t, env, "selfcheck", "durable-eventlog", "--dir", dir)
	if code != 0 || out["ok"] != true || out["first_sequence"] != 6.0 || out["last_sequence"] != 8.0 || out["durable_replay_records"] != 8.0 || out["shard"] != 1.0 {
		t.Fatalf("populated shard: %d %v", code, out)
	}

	code, out, _, _ = runWithEnv(t, map[string]string{EnvBackend: "local_reference"}, "selfcheck", "durable-eventlog")
	if code != 1 || out["ok"] != false || out["class"] != "invariant" {
		t.Errorf("local_reference: %d %v", code, out)
	}
}

// TestSelfcheckDurableDetectsLoss is the RED control: when the segment
// loses the last append between the close and the read-only reopen (what a
// write that never reached stable storage looks like), the check says so
// and exits 1.
func TestSelfcheckDurableDetectsLoss(t *testing.T) {
	for name, tc := range map[string]struct {
		code   int
		class  string
		damage func(t *testing.T, seg string)
	}{
		"last frame lost": {1, "invariant", func(t *testing.T, seg string) {
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			// Frames are 12-byte headers and a body; drop the last one.
			var ends []int
			for off := 0; off+12 <= len(data); {
				n := int(uint32(data[off+4]) | uint32(data[off+5])<<8 | uint32(data[off+6])<<16 | uint32(data[off+7])<<24)
				if n == 0 {
					break
				}
				off += 12 + n
				ends = append(ends, off)
			}
			if len(ends) < 2 {
				t.Fatalf("found %d frames", len(ends))
			}
			if err := os.WriteFile(seg, data[:ends[len(ends)-2]], 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		// A flipped byte fails its frame's CRC: corruption, a storage error.
		"payload byte changed": {5, "storage", func(t *testing.T, seg string) {
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(data, []byte(`"n\":2`))
			if i < 0 {
				t.Fatal("payload not found")
			}
			data[i+5] = '9'
			if err := os.WriteFile(seg, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c, stdout, _ := testCLI(nil)
			code := runSelfcheckDurable(c, []string{"--dir", dir}, func(shardDir string) error {
				segs, err := filepath.Glob(filepath.Join(shardDir, "seg-*.eslog"))
				if err != nil || len(segs) != 1 {
					t.Fatalf("segments %v %v", segs, err)
				}
				tc.damage(t, segs[0])
				return nil
			})
			var out map[string]any
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			if code != tc.code || out["ok"] != false || out["class"] != tc.class || out["problem"] == nil {
				t.Fatalf("damaged replay: %d %v", code, out)
			}
			t.Logf("RED control (%s): %v", name, out["error"])
		})
	}
}
