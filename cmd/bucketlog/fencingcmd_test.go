package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/fencing"
	"github.com/bucketlog/bucketlog/localseg"
)

// fencedBucket writes, on gofakes3, a bucket whose epoch 0 shipped 1..4, was
// cut at 4 by epoch 1 (which shipped 5), kept shipping 5..6 as a zombie, and
// whose epoch 2 is claimed by pod-b but not cut yet.
func fencedBucket(t *testing.T) string {
	t.Helper()
	_, url := s3Emulator(t)
	ctx := context.Background()
	b, err := blobtier.Open(ctx, url, blobtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	events := func(first, last uint64, who string) []byte {
		var out []byte
		for s := first; s <= last; s++ {
			f := localseg.Frame{Kind: localseg.KindEvent, Seq: s, ExecutionID: "1", TransactionID: "t" + strconv.FormatUint(s, 10), Payload: who + strconv.FormatUint(s, 10)}
			if out, err = localseg.EncodeFrame(out, &f); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	put := func(key string, data []byte, epoch uint64) {
		if err := b.PutIfAbsent(ctx, key, data, epoch); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	claim := func(epoch uint64, owner string) {
		c, err := fencing.Claim{Epoch: epoch, Owner: owner, Nonce: fencing.NewNonce()}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		put(blobtier.ClaimKey(0, epoch), c, 0)
	}
	put(blobtier.TailKey(0, 1, 4), events(1, 4, "a"), 0)
	claim(1, "pod-a/boot")
	rec, err := fencing.NewStartRecord(1, 0, 4, 0, 0).Encode()
	if err != nil {
		t.Fatal(err)
	}
	put(blobtier.StartKey(0, 1), rec, 0)
	put(blobtier.TailKey(0, 5, 6), events(5, 6, "zombie"), 0)
	put(blobtier.TailKey(0, 5, 5), events(5, 5, "a"), 1)
	claim(2, "pod-b/boot")
	return url
}

// TestFencingCommandRestoreAndVerifyReportTheLineage: `fencing` names the
// claims, the cut, the chain and the current owner; restore and verify
// report the lineage they followed and the zombie object they skipped.
func TestFencingCommandRestoreAndVerifyReportTheLineage(t *testing.T) {
	url := fencedBucket(t)
	r := ok(t, nil, "fencing", "--bucket", url, "--shard", "0")
	if r.obj["current_owner"] != "pod-b/boot" || r.num(t, "highest_claim") != 2 || r.num(t, "newest_epoch") != 1 {
		t.Fatalf("fencing:\n%s", r)
	}
	if !strings.Contains(r.stdout, `"claimed_not_cut":[2]`) || !strings.Contains(r.stdout, `"epochs":[0,1]`) ||
		len(r.obj["claims"].([]any)) != 2 || !strings.Contains(r.stdout, `"on_chain":true`) || !strings.Contains(r.stdout, `"prev_end_seq":4`) {
		t.Fatalf("fencing:\n%s", r)
	}
	dir := filepath.Join(t.TempDir(), "r")
	r = ok(t, nil, "restore", "--bucket", url, "--dir", dir)
	if r.num(t, "zombie_objects") != 1 || r.num(t, "last_sequence") != 5 || !strings.Contains(r.stdout, `"lineage":{"epochs":[0,1]`) {
		t.Fatalf("restore:\n%s", r)
	}
	if r = ok(t, nil, "scan", "--dir", dir, "--after", "4"); !strings.Contains(r.stdout, `"a5"`) || strings.Contains(r.stdout, "zombie") {
		t.Fatalf("restored event 5:\n%s", r)
	}
	r = ok(t, nil, "verify", "--bucket", url, "--shards", "0")
	sh := r.obj["shards"].([]any)[0].(map[string]any)
	if sh["zombie_objects"] != json.Number("1") || sh["through"] != json.Number("5") {
		t.Fatalf("verify:\n%s", r)
	}
}

// TestFencingCommandBrokenChain: a start record missing from the middle of
// the chain is exit 5 with the report and the reason.
func TestFencingCommandBrokenChain(t *testing.T) {
	_, url := s3Emulator(t)
	ctx := context.Background()
	b, err := blobtier.Open(ctx, url, blobtier.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := fencing.NewStartRecord(3, 2, 4, 0, 0).Encode()
	if err := b.PutIfAbsent(ctx, blobtier.StartKey(0, 3), rec, 0); err != nil {
		t.Fatal(err)
	}
	b.Close()
	r := runCLI(t, nil, "fencing", "--bucket", url).want(t, 5, "storage")
	if !strings.Contains(r.obj["lineage_error"].(string), "broken") || len(r.obj["cuts"].([]any)) != 1 {
		t.Fatalf("broken chain:\n%s", r)
	}
}
