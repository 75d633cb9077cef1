package routed

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/localseg/faultfs"
)

// TestRefusalTouchesNoFilesystem: a refused append, batch, pull or ack
// issues no filesystem operation at all (not even a read), proven by
// recording every operation the stores ask of the filesystem. It also runs
// the whole pool on an in-memory filesystem, which proves that the Log and
// its default cold reader go through Options.Store.FS only.
func TestRefusalTouchesNoFilesystem(t *testing.T) {
	rec := faultfs.NewRecorder(faultfs.AnyOp)
	fsys := faultfs.Wrap(faultfs.NewMemFS(), rec)
	opts := Options{Store: localseg.Options{FS: fsys}}
	root := "/pool"
	var logs []*Log
	for i := range 2 {
		l, err := Open(root, affinity.Ownership{Index: i, Count: 2}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs = append(logs, l)
	}
	ids := idsByShard(2, 1)
	if _, err := logs[1].Append(ev(ids[1][0], "t", "owned by 1")); err != nil {
		t.Fatal(err)
	}
	before := len(rec.Ops())
	if _, err := logs[0].Append(ev(ids[1][0], "t", "refused")); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatal(err)
	}
	if _, _, err := logs[0].AppendBatch([]localseg.Event{ev(ids[0][0], "a", "x"), ev(ids[1][0], "b", "y")}); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatal(err)
	}
	if _, err := logs[0].Pull(1, "c", 1); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatal(err)
	}
	if _, err := logs[0].Ack(1, "c", 1); !errors.Is(err, affinity.ErrNotOwner) {
		t.Fatal(err)
	}
	if ops := rec.Ops()[before:]; len(ops) != 0 {
		t.Fatalf("refusals issued %d filesystem operations, first %v", len(ops), ops[0])
	}
	// A cold load on the same in-memory filesystem sees the owner's event.
	res, err := logs[0].Read(ids[1][0], 0, 10)
	if err != nil || res.ServedBy != affinity.ServedByNonOwnerColdLoad || len(res.Page.Records) != 1 || res.Page.Records[0].Payload != "owned by 1" {
		t.Fatalf("cold read on MemFS = %+v, %v", res, err)
	}
	// A cold load issues no write.
	before = len(rec.Ops())
	if _, err := logs[0].Read(ids[1][0], 0, 10); err != nil {
		t.Fatal(err)
	}
	for _, op := range rec.Ops()[before:] {
		if op.Kind.IsWrite() {
			t.Fatalf("a cold load wrote: %v", op)
		}
	}
}
