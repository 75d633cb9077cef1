package drives

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
)

func dirDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	return out
}

// TestAffinityAppendOneShot: the owner serves a routed append; a non-owner
// refuses it (the CLI exits 6), naming the owner, with no byte written to
// the owner's shard (CHECKLIST §2.5).
func TestAffinityAppendOneShot(t *testing.T) {
	root := t.TempDir()
	n := 2
	id := driveExecutions(n, 1)[1] // owned by shard 1
	ev := localseg.Event{ExecutionID: " " + id + " ", TransactionID: "t1", Payload: "<é>&"}

	out, err := AffinityAppend(root, affinity.Ownership{Index: 1, Count: n}, ev)
	if err != nil || out.Refused() || out.Decision != affinity.DecisionOwned || out.NotOwner() != nil {
		t.Fatalf("owner append = %+v, %v", out, err)
	}
	want := fmt.Sprintf(`{"action":"eventlog-append","execution_id":"%s","global_sequence":1,"byte_len":5,"created_stream":true,"log_record_count":1,"decision":"owned","shard_index":1,"shard_count":2,"owner_shard":1}`, id)
	if got := mustJSON(t, out); got != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}

	owner := localseg.ShardDir(root, 1)
	before := dirDigest(t, owner)
	out, err = AffinityAppend(root, affinity.Ownership{Index: 0, Count: n}, ev)
	if err != nil || !out.Refused() || out.OwnerShard != 1 || out.GlobalSequence != nil || out.LogRecordCount != nil {
		t.Fatalf("non-owner append = %+v, %v", out, err)
	}
	var noe *affinity.NotOwnerError
	if !errors.As(out.NotOwner(), &noe) || noe.Owner != 1 {
		t.Fatalf("NotOwner() = %v", out.NotOwner())
	}
	want = fmt.Sprintf(`{"action":"eventlog-append","execution_id":"%s","global_sequence":null,"byte_len":5,"created_stream":false,"log_record_count":null,"decision":"not_owner","shard_index":0,"shard_count":2,"owner_shard":1}`, id)
	if got := mustJSON(t, out); got != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
	if after := dirDigest(t, owner); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused append changed the owner's shard")
	}
	// The refusing replica's own shard has no event either.
	res, err := AffinityRead(root, affinity.Ownership{Index: 0, Count: n}, driveExecutions(n, 1)[0], 0, 10)
	if err != nil || res.Exists || res.Returned != 0 {
		t.Fatalf("the refusing replica's shard = %+v, %v", res, err)
	}
	// No sequence consumed: the owner's next append is 2 (a new
	// transaction id: the same one again would be a retry of sequence 1).
	ev.TransactionID = "t2"
	out, err = AffinityAppend(root, affinity.Ownership{Index: 1, Count: n}, ev)
	if err != nil || *out.GlobalSequence != 2 || out.CreatedStream {
		t.Fatalf("second owner append = %+v, %v", out, err)
	}
}

// TestAffinityReadOneShot: the owner serves resident, a non-owner by a
// cold load that returns the same records and changes nothing
// (CHECKLIST §2.6).
func TestAffinityReadOneShot(t *testing.T) {
	root := t.TempDir()
	n := 4
	id := driveExecutions(n, 1)[2] // owned by shard 2
	own := affinity.Ownership{Index: 2, Count: n}
	for i := range 3 {
		if _, err := AffinityAppend(root, own, localseg.Event{ExecutionID: id, TransactionID: fmt.Sprint("t", i), Payload: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	resident, err := AffinityRead(root, own, id, 1, 10)
	if err != nil || resident.ServedBy != affinity.ServedByOwnerResident || resident.Returned != 2 || resident.RecordCount != 2 {
		t.Fatalf("owner read = %+v, %v", resident, err)
	}
	before := dirDigest(t, localseg.ShardDir(root, 2))
	cold, err := AffinityRead(root, affinity.Ownership{Index: 3, Count: n}, id, 1, 10)
	if err != nil || cold.ServedBy != affinity.ServedByNonOwnerColdLoad || cold.OwnerShard != 2 || cold.ShardIndex != 3 {
		t.Fatalf("non-owner read = %+v, %v", cold, err)
	}
	if !reflect.DeepEqual(cold.Records, resident.Records) || cold.RecordCount != resident.RecordCount {
		t.Fatalf("cold records %+v differ from resident %+v", cold.Records, resident.Records)
	}
	if after := dirDigest(t, localseg.ShardDir(root, 2)); !reflect.DeepEqual(before, after) {
		t.Fatalf("a cold load changed the owner's shard")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(mustJSON(t, cold)), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"action", "execution_id", "exists", "base", "clamped", "record_count", "returned", "records", "served_by", "shard_index", "shard_count", "owner_shard"} {
		if _, ok := m[k]; !ok {
			t.Errorf("read outcome lacks %q", k)
		}
	}
	rec := m["records"].([]any)[0].(map[string]any)
	for _, k := range []string{"global_sequence", "execution_id", "transaction_id", "byte_len", "payload"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record lacks %q", k)
		}
	}
	// A read of an execution of a never-written shard is empty, with
	// records [] (not null).
	empty, err := AffinityRead(root, own, driveExecutions(n, 1)[1], 0, 10)
	if err != nil || empty.Exists || empty.ServedBy != affinity.ServedByNonOwnerColdLoad {
		t.Fatalf("empty read = %+v, %v", empty, err)
	}
	if got := mustJSON(t, empty.Records); got != "[]" {
		t.Fatalf("empty records marshal as %s", got)
	}
}

func TestOneShotErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := AffinityAppend(root, affinity.Ownership{Index: 2, Count: 2}, localseg.Event{ExecutionID: "1", TransactionID: "t"}); !errors.Is(err, affinity.ErrConfig) {
		t.Errorf("bad ownership: %v", err)
	}
	if _, err := AffinityAppend(root, affinity.Ownership{Index: 0, Count: 2}, localseg.Event{ExecutionID: "a b", TransactionID: "t"}); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Errorf("bad id: %v", err)
	}
	if _, err := AffinityRead(root, affinity.Ownership{Index: 0, Count: 2}, "", 0, 10); !errors.Is(err, localseg.ErrInvalidInput) {
		t.Errorf("empty id: %v", err)
	}
}
