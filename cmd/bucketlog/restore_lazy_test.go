package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreLazy: restore --lazy downloads the newest segments within the
// budget and reports (JSON and stderr) what remains in the bucket; --lazy
// without a budget, and a budget without --lazy, are usage errors that
// write nothing.
func TestRestoreLazy(t *testing.T) {
	bucket, _ := fileBucket(t)
	a := filepath.Join(t.TempDir(), "a")
	appendN(t, nil, a, 0, 40, "--segment-max-bytes", "300")
	ok(t, nil, "ship", "--dir", a, "--bucket", bucket, "--seal-active")
	b := filepath.Join(t.TempDir(), "b")
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", b, "--lazy").want(t, 2, "usage")
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", b, "--local-retention-bytes", "600").want(t, 2, "usage")
	r := ok(t, nil, "restore", "--bucket", bucket, "--dir", b, "--lazy", "--local-retention-bytes", "600")
	lz, _ := r.obj["lazy"].(map[string]any)
	if lz == nil || lz["full_because"] != nil || lz["remote_segments"] == nil || r.num(t, "last_sequence") != 40 {
		t.Fatalf("restore --lazy:\n%s", r)
	}
	if !strings.Contains(r.stderr, "remain in the bucket") {
		t.Fatalf("restore --lazy's stderr does not say what remains remote:\n%s", r.stderr)
	}
	if r := ok(t, []string{"BUCKETLOG_LOCAL_RETENTION_BYTES=600"}, "restore", "--bucket", bucket, "--dir", filepath.Join(t.TempDir(), "c"), "--lazy"); r.obj["lazy"] == nil {
		t.Fatalf("restore --lazy with the budget from the environment:\n%s", r)
	}
	// The local events read without the bucket.
	if r := ok(t, nil, "scan", "--dir", b, "--after", "38", "--limit", "2"); r.num(t, "record_count") != 2 {
		t.Fatalf("scan of the local events:\n%s", r)
	}
}
