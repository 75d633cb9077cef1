package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/watermark"
)

// Issue 12 finding 11: a forged watermark (valid digest) far above what the
// bucket holds is a verify problem (exit 1, class watermark) and a refused
// restore (exit 3); --allow-watermark-ahead takes it and says so.
func TestForgedWatermarkVerifyAndRestore(t *testing.T) {
	bucket, _ := fileBucket(t)
	a := filepath.Join(t.TempDir(), "a")
	appendN(t, nil, a, 0, 3)
	ok(t, nil, "ship", "--dir", a, "--bucket", bucket, "--seal-active")

	ctx := context.Background()
	b, err := blobtier.Open(ctx, bucket, blobtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := watermark.Mark{Seq: 999_999, Segment: 1, V: 9}
	if err := b.Put(ctx, blobtier.WatermarkKey(0), m.Encode()); err != nil {
		t.Fatal(err)
	}
	b.Close()

	r := runCLI(t, nil, "verify", "--bucket", bucket).want(t, 1, "invariant")
	probs := r.obj["problems"].([]any)
	if len(probs) != 1 || probs[0].(map[string]any)["class"] != "watermark" {
		t.Fatalf("verify of a forged watermark:\n%s", r)
	}
	runCLI(t, nil, "restore", "--bucket", bucket, "--dir", filepath.Join(t.TempDir(), "b")).want(t, 3, "invalid_state")
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", filepath.Join(t.TempDir(), "c"), "--allow-watermark-ahead")
	if r.obj["watermark_ahead"] == nil || r.obj["watermark_ahead"] == "" || !strings.Contains(r.stderr, "warning: coldload: shard 0: the watermark") {
		t.Fatalf("restore --allow-watermark-ahead:\n%s", r)
	}
}

// Issue 12 finding 5: a damaged cursor object does not stop a restore; the
// report and stderr say it was damaged, and verify lists it (exit 1).
func TestDamagedCursorObjectRestoreAndVerify(t *testing.T) {
	bucket, _ := fileBucket(t)
	a := filepath.Join(t.TempDir(), "a")
	appendN(t, nil, a, 0, 3)
	ok(t, nil, "tail", "--dir", a, "--consumer", "c", "--limit", "1")
	ok(t, nil, "ack", "--dir", a, "--consumer", "c", "--sequence", "2")
	ok(t, nil, "ship", "--dir", a, "--bucket", bucket, "--seal-active")

	ctx := context.Background()
	b, err := blobtier.Open(ctx, bucket, blobtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, blobtier.CursorKey(0), []byte(`{"v":3,"shipped_`)); err != nil {
		t.Fatal(err)
	}
	b.Close()

	r := runCLI(t, nil, "verify", "--bucket", bucket).want(t, 1, "invariant")
	probs := r.obj["problems"].([]any)
	if len(probs) != 1 || probs[0].(map[string]any)["class"] != "corrupt" || probs[0].(map[string]any)["key"] != blobtier.CursorKey(0) {
		t.Fatalf("verify of a damaged cursor object:\n%s", r)
	}
	r = ok(t, nil, "restore", "--bucket", bucket, "--dir", filepath.Join(t.TempDir(), "b"))
	if r.obj["cursor_damaged"] != true || r.num(t, "last_sequence") != 3 || !strings.Contains(r.stderr, "cursor object is damaged") {
		t.Fatalf("restore over a damaged cursor object:\n%s", r)
	}
}
