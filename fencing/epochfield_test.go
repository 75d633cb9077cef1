package fencing

import (
	"errors"
	"testing"
)

func TestWithEpochKeepsEveryFieldAndStoredEpochReadsIt(t *testing.T) {
	body := []byte(`{"seq":9,"segment":2,"v":5}`)
	if e, err := StoredEpoch(body); e != 0 || err != nil {
		t.Fatalf("no epoch field: %d %v", e, err)
	}
	got, err := WithEpoch(body, 7)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"epoch":7,"segment":2,"seq":9,"v":5}` {
		t.Fatalf("body %s", got)
	}
	if e, err := StoredEpoch(got); e != 7 || err != nil {
		t.Fatalf("stored epoch %d %v", e, err)
	}
	if _, err := WithEpoch([]byte(`null`), 1); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("null body: %v", err)
	}
	if _, err := StoredEpoch([]byte(`{"epoch":-1}`)); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("negative epoch: %v", err)
	}
}
