package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// TestServeBatchStorageErrorNamesTheDurablePrefix: a batch whose rollover
// fails (ENOSPC making the successor segment) after the seal's fsync
// covered its first events is answered 503 with the storage error and the
// part that is durable: its sequences (first_sequence..last_sequence),
// the duplicates it holds, and durable_prefix, the number of the batch's
// leading events that are durable, so a client sends only the rest again.
func TestServeBatchStorageErrorNamesTheDurablePrefix(t *testing.T) {
	ctx := context.Background()
	inj := faultfs.NewToggle(faultfs.Fail(faultfs.ENOSPC, faultfs.PathContains(localseg.SegmentFileName(2))), false)
	dir := t.TempDir()
	const segMax = 8192
	l, err := bucketlog.Open(ctx, bucketlog.Options{Dir: dir, SegmentMaxBytes: segMax, FS: faultfs.Wrap(localseg.OSFS{}, inj), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	a := newAPI(apiConfig{own: affinity.SingleOwner, segMax: segMax, maxBody: 1 << 20})
	a.setLog(l)
	payload := strings.Repeat("p", 1000)
	for i := range 6 { // 6 of the 7 frames segment 1 holds
		if code, out := call(t, a, "POST", "/v1/events", eventJSON("e", fmt.Sprint("fill-", i), payload)); code != http.StatusCreated {
			t.Fatalf("append %d: %d %v", i, code, out)
		}
	}
	batch := func(txns ...string) string {
		evs := make([]json.RawMessage, len(txns))
		for i, txn := range txns {
			evs[i] = json.RawMessage(eventJSON("e", txn, payload))
		}
		b, _ := json.Marshal(map[string]any{"events": evs})
		return string(b)
	}
	// b0 fills segment 1; fill-0 is a duplicate (sequence 1); b1 and b2
	// need the successor segment.
	inj.On()
	code, out := call(t, a, "POST", "/v1/events", batch("b0", "fill-0", "b1", "b2"))
	inj.Off()
	if code != http.StatusServiceUnavailable || out["class"] != "storage" || out["error"] == nil {
		t.Fatalf("the batch with its rollover failing: %d %v", code, out)
	}
	if out["appended"] != 1.0 || out["first_sequence"] != 7.0 || out["last_sequence"] != 7.0 || out["durable_prefix"] != 2.0 {
		t.Fatalf("the failed batch's answer does not name its durable prefix (b0 at 7, the duplicate at 1): %v", out)
	}
	if d, _ := out["duplicates"].([]any); len(d) != 1 || fmt.Sprint(d[0]) != "map[global_sequence:1 index:1]" {
		t.Fatalf("duplicates of the durable prefix: %v", out["duplicates"])
	}
	// The premise: exactly b0 is durable. Reopened, the store's tip is 7.
	l.Close()
	if l, err = bucketlog.Open(ctx, bucketlog.Options{Dir: dir, SegmentMaxBytes: segMax, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if tip := l.Store().Tip(); tip != 7 {
		t.Fatalf("after the failed batch the store's tip is %d, want 7 (b0 durable, b1 and b2 not)", tip)
	}
	a = newAPI(apiConfig{own: affinity.SingleOwner, segMax: segMax, maxBody: 1 << 20})
	a.setLog(l)
	if code, out := call(t, a, "POST", "/v1/events", batch("b1", "b2")); code != http.StatusCreated || out["first_sequence"] != 8.0 || out["last_sequence"] != 9.0 {
		t.Fatalf("the rest sent again: %d %v", code, out)
	}
}
