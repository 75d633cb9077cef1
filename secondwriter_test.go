package bucketlog

import (
	"errors"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

// secondWriterShard returns a Log that has detected a second writer, with
// a consumer "old" created before the detection.
func secondWriterShard(t *testing.T) *Log {
	t.Helper()
	ctx := ctxT(t)
	b := memBucket(t)
	a := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Logger: quiet()})
	t.Cleanup(func() { a.Close() })
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Pull(ctx, "old", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	other := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true, Logger: quiet()})
	defer other.Close()
	a.Append(ctx, ev("1", 4))
	other.Append(ctx, ev("2", 4))
	if _, err := other.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ship(ctx, false); !errors.Is(err, ErrSecondWriter) {
		t.Fatalf("ship over a second writer's object: %v", err)
	}
	return a
}

// Finding 10: after ErrSecondWriter the shard refuses every write (storage,
// 503) and writes nothing.
func TestSecondWriterRefusesWrites(t *testing.T) {
	ctx := ctxT(t)
	a := secondWriterShard(t)
	before, err := a.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrSecondWriter) || Class(err) != ClassStorage || HTTPStatus(err) != 503 {
			t.Errorf("%s after a second writer: %v (class %s, HTTP %d), want a storage refusal", what, err, Class(err), HTTPStatus(err))
		}
	}
	_, err = a.Append(ctx, ev("1", 5))
	refused("append", err)
	_, err = a.AppendBatch(ctx, []localseg.Event{ev("1", 6), ev("1", 7)})
	refused("append batch", err)
	_, err = a.Pull(ctx, "fresh", 10)
	refused("pull creating a consumer", err)
	_, _, err = a.PullBytes(ctx, "fresh-bytes", 10, 1<<20)
	refused("pull (bytes) creating a consumer", err)
	_, err = a.Ack(ctx, "old", 2)
	refused("ack", err)
	refused("consumer delete", a.DeleteConsumer(ctx, "old"))

	after, err := a.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if after.Tip != before.Tip || len(after.Consumers) != len(before.Consumers) || after.Consumers["old"] != before.Consumers["old"] {
		t.Fatalf("refused writes changed the store: before tip %d consumers %v, after tip %d consumers %v",
			before.Tip, before.Consumers, after.Tip, after.Consumers)
	}
	var size0, size1 int64
	for _, s := range before.Segments {
		size0 += s.Size
	}
	for _, s := range after.Segments {
		size1 += s.Size
	}
	if size0 != size1 {
		t.Fatalf("refused writes wrote %d bytes", size1-size0)
	}
	// Reads still work, and a pull of an existing consumer is a read.
	if _, err := a.Scan(ctx, 0, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pull(ctx, "old", 10); err != nil {
		t.Fatalf("pull of an existing consumer: %v", err)
	}
}
