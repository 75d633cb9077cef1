package localseg

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOwnerRecordRoundTripAndStrict: owner.json is written durably and read
// back exactly; a damaged record is ErrCorrupt (never read as "no owner");
// the store opens with the record beside it.
func TestOwnerRecordRoundTripAndStrict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shard-0000")
	if _, ok, err := ReadOwner(OSFS{}, dir); ok || err != nil {
		t.Fatalf("missing dir: ok=%v err=%v", ok, err)
	}
	want := Owner{Epoch: 7, Nonce: "0123456789abcdef0123456789abcdef", Cut: false}
	if err := WriteOwner(OSFS{}, dir, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadOwner(OSFS{}, dir)
	if err != nil || !ok || got != want {
		t.Fatalf("read %+v ok=%v err=%v, want %+v", got, ok, err, want)
	}
	if is, _ := IsStore(dir); is {
		t.Fatal("a directory holding only owner.json counts as a store")
	}
	want.Cut = true
	if err := WriteOwner(OSFS{}, dir, want); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := ReadOwner(OSFS{}, dir); got != want {
		t.Fatalf("rewrite: %+v", got)
	}
	if err := WriteOwner(OSFS{}, dir, Owner{Epoch: 0, Nonce: want.Nonce}); err == nil {
		t.Fatal("epoch 0 written")
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("the store does not open beside owner.json: %v", err)
	}
	st.Close()
	for _, bad := range []string{`{"epoch":7}`, `{"epoch":7,"nonce":"x","cut":false}`, `not json`, `{"epoch":7,"nonce":"0123456789abcdef0123456789abcdef","cut":true,"extra":1}`} {
		if err := os.WriteFile(filepath.Join(dir, ownerName), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := ReadOwner(OSFS{}, dir); !errors.Is(err, ErrCorrupt) || ok {
			t.Errorf("%s: ok=%v err=%v, want ErrCorrupt", bad, ok, err)
		}
	}
}

// TestMoveAsideFencedAndReplaceWithStaged: the stale owner's directory keeps
// its bytes under shard-NNNN.fenced-<epoch>; a staged store replaces a
// directory holding only owner.json.
func TestMoveAsideFencedAndReplaceWithStaged(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "shard-0003")
	o := Owner{Epoch: 4, Nonce: "0123456789abcdef0123456789abcdef", Cut: true}
	if err := WriteOwner(OSFS{}, dir, o); err != nil {
		t.Fatal(err)
	}
	to, err := MoveAsideFenced(OSFS{}, dir, 4)
	if err != nil || to != filepath.Join(root, "shard-0003.fenced-4") {
		t.Fatalf("moved to %q: %v", to, err)
	}
	if got, ok, _ := ReadOwner(OSFS{}, to); !ok || got != o {
		t.Fatalf("moved-aside record %+v ok=%v", got, ok)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("dir still there: %v", err)
	}
	if err := WriteOwner(OSFS{}, dir, o); err != nil {
		t.Fatal(err)
	}
	if _, err := MoveAsideFenced(OSFS{}, dir, 4); err == nil {
		t.Fatal("an existing fenced directory was overwritten")
	}
	staged := TakeoverStagingDir(dir)
	if err := os.MkdirAll(staged, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staged, "x"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceWithStaged(OSFS{}, staged, dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "x")); err != nil || string(b) != "y" {
		t.Fatalf("staged contents not in place: %q %v", b, err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 2 {
		t.Fatalf("root holds %d entries, want shard-0003 and its fenced copy", len(entries))
	}
}
