package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestQuarantineListAndDrop: a moved-aside directory (shard-NNNN.fenced-E)
// is listed with its events and removed by drop, which touches nothing
// else and refuses an epoch that has no such directory.
func TestQuarantineListAndDrop(t *testing.T) {
	root := t.TempDir()
	for _, txn := range []string{"t1", "t2"} {
		if r := runCLI(t, nil, "append", "--dir", root, "--execution-id", "e", "--transaction-id", txn, "--payload", "{}"); r.code != 0 {
			t.Fatalf("append: %s", r)
		}
	}
	shard := filepath.Join(root, "shard-0000")
	if err := os.Rename(shard, shard+".fenced-3"); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "quarantine", "list", "--dir", root, "--shard", "0")
	if r.code != 0 {
		t.Fatalf("list: %s", r)
	}
	qs, _ := r.obj["quarantined"].([]any)
	if len(qs) != 1 {
		t.Fatalf("list: %s", r)
	}
	q := qs[0].(map[string]any)
	if fmt.Sprintf("%v %v %v", q["epoch"], q["first_sequence"], q["last_sequence"]) != "3 1 2" {
		t.Fatalf("listed %v", q)
	}
	if r := runCLI(t, nil, "quarantine", "drop", "--dir", root, "--shard", "0", "--epoch", "4"); r.code != 3 {
		t.Fatalf("drop of an epoch without a directory: %s", r)
	}
	if r := runCLI(t, nil, "quarantine", "drop", "--dir", root, "--shard", "0", "--epoch", "3"); r.code != 0 {
		t.Fatalf("drop: %s", r)
	}
	if _, err := os.Stat(shard + ".fenced-3"); !os.IsNotExist(err) {
		t.Fatalf("the dropped directory is still there: %v", err)
	}
	if r := runCLI(t, nil, "quarantine", "list", "--dir", root, "--shard", "0"); r.code != 0 || len(r.obj["quarantined"].([]any)) != 0 {
		t.Fatalf("list after drop: %s", r)
	}
}
