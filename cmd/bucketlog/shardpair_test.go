package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/affinity"
)

// ownedBy returns an execution id that shard of a pool of n owns.
func ownedBy(t *testing.T, shard, n int) string {
	t.Helper()
	for i := range 1000 {
		if id := fmt.Sprint(i); affinity.ShardFor(id, n) == shard {
			return id
		}
	}
	t.Fatal("no execution id found")
	return ""
}

// TestStoreKeepsItsShardPair (issue 12, finding 13): a store written as
// shard 0 of 1 is refused as shard 0 of 2 (usage, exit 2) and left as it
// was; a refused non-owner append on an empty root leaves no trace at all.
func TestStoreKeepsItsShardPair(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	app := func(env map[string]string, exec string) (int, map[string]any) {
		code, out, _, _ := runWithEnv(t, env, "append", "--dir", root, "--execution-id", exec, "--transaction-id", "t-"+exec, "--payload", "p")
		return code, out
	}
	two := func(idx int) map[string]string {
		return map[string]string{"NOETL_SHARD_INDEX": fmt.Sprint(idx), "NOETL_SHARD_COUNT": "2"}
	}

	// Not owned: refused before anything exists.
	if code, out := app(two(1), ownedBy(t, 0, 2)); code != 6 {
		t.Fatalf("non-owner append: exit %d %v, want 6", code, out)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused non-owner append left %s behind (%v)", root, err)
	}

	if code, out := app(nil, "1"); code != 0 {
		t.Fatalf("append as 0 of 1: exit %d %v", code, out)
	}
	dir := filepath.Join(root, "shard-0000")
	before := snapshotFiles(t, dir)
	code, out := app(two(0), ownedBy(t, 0, 2))
	if code != 2 {
		t.Fatalf("append as 0 of 2 to a store written as 0 of 1: exit %d %v, want 2 (usage)", code, out)
	}
	if after := snapshotFiles(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("the refused open changed the store")
	}
	if code, out := app(nil, "2"); code != 0 {
		t.Fatalf("append as 0 of 1 again: exit %d %v", code, out)
	}
}

func snapshotFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// TestBackendTokenIsExact: the README's Configuration table selects the non-durable local_reference
// driver only by that exact token; a value with surrounding blanks keeps
// the durable store (with a warning).
func TestBackendTokenIsExact(t *testing.T) {
	for raw, want := range map[string]string{
		"local_reference":     "local_reference",
		"local_reference ":    "durable_segment",
		" local_reference":    "durable_segment",
		"\tlocal_reference\n": "durable_segment",
		"durable_segment":     "durable_segment",
	} {
		code, out, _, _ := runWithEnv(t, map[string]string{"NOETL_EHDB_EVENTLOG_BACKEND": raw}, "selfcheck", "config")
		if code != 0 || out["storage_backend"] != want {
			t.Errorf("%q: exit %d, storage_backend %v, want %s", raw, code, out["storage_backend"], want)
		}
	}
}
