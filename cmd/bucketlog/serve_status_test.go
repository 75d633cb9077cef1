package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// statusOf is GET /v1/status's one shard.
func statusOf(t *testing.T, h http.Handler) map[string]any {
	t.Helper()
	code, out := call(t, h, "GET", "/v1/status", "")
	shards, _ := out["shards"].([]any)
	if code != http.StatusOK || len(shards) != 1 {
		t.Fatalf("GET /v1/status: %d %v", code, out)
	}
	return shards[0].(map[string]any)
}

// waitStatus polls /v1/status until ok accepts it.
func waitStatus(t *testing.T, h http.Handler, what string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		st := statusOf(t, h)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("/v1/status never %s: %v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServeReadyWhileBucketFails: readiness means "takes appends". With
// the bucket refusing every write, appends answer 201 and /readyz stays
// 200, while /v1/status says degraded, with the unshipped range, its age
// and the bucket's (redacted) error, and the log says it once at WARN;
// when the bucket answers again everything ships, the status is ready and
// the log says so at INFO.
func TestServeReadyWhileBucketFails(t *testing.T) {
	ctx := context.Background()
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
	defer b.Close()
	logs := &lockedBuffer{}
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Bucket: b, TailInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)
	if st := statusOf(t, a); st["state"] != "ready" || st["bucket"] != true || st["fenced"] != false {
		t.Fatalf("status of a fresh shard: %v", st)
	}

	rule := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal})
	for i := range 6 {
		if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", fmt.Sprint("t", i), "p")); code != http.StatusCreated {
			t.Fatalf("append %d with the bucket refusing: %d %v", i, code, out)
		}
	}
	st := waitStatus(t, a, "degraded with a failure", func(st map[string]any) bool {
		return st["state"] == "degraded" && st["last_bucket_error"] != nil && st["failures_in_streak"].(float64) >= 3
	})
	if st["tip"] != 6.0 || st["shipped_through"] != 0.0 || st["unshipped"] != 6.0 || st["bucket_failing"] != true ||
		st["ready"] != true || st["failing_since"] == nil || st["oldest_unshipped_age_seconds"].(float64) <= 0 || st["consumers"] != 0.0 {
		t.Fatalf("status with the bucket refusing: %v", st)
	}
	if code, out := call(t, a, "GET", "/readyz", ""); code != http.StatusOK || out["ready"] != true {
		t.Fatalf("/readyz with the bucket refusing but appends taken: %d %v", code, out)
	}
	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t6", "p")); code != http.StatusCreated {
		t.Fatalf("append after failures: %d %v", code, out)
	}
	if n := strings.Count(logs.String(), "the bucket is failing"); n != 1 {
		t.Fatalf("%d WARN lines for one failure streak, want 1:\n%s", n, logs)
	}

	fb.Remove(rule)
	st = waitStatus(t, a, "ready and shipped", func(st map[string]any) bool {
		return st["state"] == "ready" && st["unshipped"] == 0.0
	})
	if st["shipped_through"] != 7.0 || st["last_shipped_at"] == nil || st["bucket_failing"] != false || st["oldest_unshipped_age_seconds"] != 0.0 {
		t.Fatalf("status once the bucket is back: %v", st)
	}
	if !strings.Contains(logs.String(), "level=INFO msg=\"the bucket recovered\"") {
		t.Fatalf("no INFO line when the bucket recovered:\n%s", logs)
	}
}

// TestServeNotReadyWhenDiskRefuses: a local disk that refuses appends
// (every data fsync fails) makes /readyz 503: the pod no longer takes
// durable writes, whatever the bucket does.
func TestServeNotReadyWhenDiskRefuses(t *testing.T) {
	ctx := context.Background()
	inj := faultfs.NewToggle(faultfs.Fail(faultfs.EIO, faultfs.Kinds(faultfs.OpSync, faultfs.OpWrite)), false)
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer b.Close()
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Bucket: b, FS: faultfs.Wrap(localseg.OSFS{}, inj), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner})
	a.setLog(l)
	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t", "p")); code != http.StatusCreated {
		t.Fatalf("append: %d %v", code, out)
	}
	inj.On()
	if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t2", "p")); code != http.StatusServiceUnavailable {
		t.Fatalf("append with the disk refusing: %d %v", code, out)
	}
	if code, out := call(t, a, "GET", "/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(out["reason"]), "poisoned") {
		t.Fatalf("/readyz with the disk refusing appends: %d %v", code, out)
	}
	if st := statusOf(t, a); st["state"] != "not_ready" || st["ready"] != false {
		t.Fatalf("status with the disk refusing appends: %v", st)
	}
}

// TestServeUnshippedBound: with MaxUnshippedAge set and the bucket failing
// past it, /readyz answers 503; with RefuseWhenUnshipped appends are then
// refused (503, storage, nothing written); without it they are taken.
// When the bucket answers again the shard is ready and takes appends.
func TestServeUnshippedBound(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprint("refuse=", refuse), func(t *testing.T) {
			ctx := context.Background()
			fb := faultbucket.New(memblob.OpenBucket(nil), 1)
			b := blobtier.New(fb.Bucket(), blobtier.Options{Timeout: 5 * time.Second})
			defer b.Close()
			l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: t.TempDir(), Bucket: b, TailInterval: 20 * time.Millisecond,
				MaxUnshippedAge: 150 * time.Millisecond, RefuseWhenUnshipped: refuse, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			a := newAPI(apiConfig{own: affinity.SingleOwner})
			a.setLog(l)
			rule := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Refuse, Code: gcerrors.Internal})
			if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t0", "p")); code != http.StatusCreated {
				t.Fatalf("first append with the bucket refusing: %d %v", code, out)
			}
			waitReadyz(t, a, http.StatusServiceUnavailable, "unshipped-age bound")
			tip := l.Store().Tip()
			code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t1", "p"))
			if refuse && (code != http.StatusServiceUnavailable || out["class"] != "storage" || l.Store().Tip() != tip) {
				t.Fatalf("append past the bound with --refuse-when-unshipped: %d %v (tip %d → %d)", code, out, tip, l.Store().Tip())
			}
			if !refuse && code != http.StatusCreated {
				t.Fatalf("append past the bound without --refuse-when-unshipped: %d %v", code, out)
			}
			fb.Remove(rule)
			waitReadyz(t, a, http.StatusOK, "")
			if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", "t2", "p")); code != http.StatusCreated {
				t.Fatalf("append once the bucket is back: %d %v", code, out)
			}
		})
	}
}
