package blobtier_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
)

// RED controls: each shows the loss that a blobtier mechanism prevents, by
// doing the same thing without it, on both emulators.
func TestRedControls(t *testing.T) {
	s, g := startS3(t), startGCS(t)
	for _, e := range []struct {
		name   string
		create func(string) error
		open   func(context.Context, string) (*blob.Bucket, error)
		putRaw func(bucket, key string, data []byte, meta map[string]string) error
	}{
		{"s3", s.CreateBucket, s.OpenBucket, s.PutRaw},
		{"gcs", g.CreateBucket, g.OpenBucket, g.PutRaw},
	} {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			name := uniqueName("red")
			if err := e.create(name); err != nil {
				t.Fatal(err)
			}
			raw, err := e.open(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			b := blobtier.New(raw, blobtier.Options{})
			defer b.Close()

			// Verified reads: the server hands back a flipped byte without
			// complaint; only the digest in metadata catches it.
			data := bytes.Repeat([]byte("event frame "), 100)
			flipped := bytes.Clone(data)
			flipped[600] ^= 0x08
			key := blobtier.SegmentKey(0, 1)
			if err := e.putRaw(name, key, flipped, blobtier.MetaOf(data, 0).Encode()); err != nil {
				t.Fatal(err)
			}
			got, err := raw.ReadAll(ctx, key)
			if err != nil || !bytes.Equal(got, flipped) {
				t.Fatalf("RED: an unverified read = %v; want the corrupt bytes, silently", err)
			}
			if _, _, err := b.Get(ctx, key); !errors.Is(err, blobtier.ErrCorrupt) {
				t.Fatalf("verified read of the same object: %v", err)
			}

			// Write-once: without create-if-absent a second writer replaces
			// the first writer's segment, silently.
			key = blobtier.SegmentKey(0, 2)
			if err := b.PutIfAbsent(ctx, key, []byte("first writer"), 0); err != nil {
				t.Fatal(err)
			}
			if err := raw.WriteAll(ctx, key, []byte("second writer"), nil); err != nil {
				t.Fatalf("RED: an unconditional second put: %v", err)
			}
			if got, _ := raw.ReadAll(ctx, key); string(got) != "second writer" {
				t.Fatalf("RED: %q", got)
			}
			key = blobtier.SegmentKey(0, 3)
			if err := b.PutIfAbsent(ctx, key, []byte("first writer"), 0); err != nil {
				t.Fatal(err)
			}
			if err := b.PutIfAbsent(ctx, key, []byte("second writer"), 0); !errors.Is(err, blobtier.ErrConflict) {
				t.Fatalf("PutIfAbsent by a second writer: %v", err)
			}

			// Compare-and-swap: two writers that read the same version both
			// "succeed" with plain puts, and the first update is lost.
			key = blobtier.WatermarkKey(0)
			if err := b.CompareAndSwap(ctx, key, []byte(`{"seq":1,"v":1}`), ""); err != nil {
				t.Fatal(err)
			}
			_, tok, err := b.GetVersioned(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Put(ctx, key, []byte(`{"seq":5,"v":2}`)); err != nil {
				t.Fatal(err)
			}
			if err := b.Put(ctx, key, []byte(`{"seq":3,"v":2}`)); err != nil {
				t.Fatal(err)
			}
			if got, _, _ := b.Get(ctx, key); string(got) != `{"seq":3,"v":2}` {
				t.Fatalf("RED: %q", got)
			}
			// The same two writers with CAS on the version they read: the
			// second is refused and must re-read.
			if err := b.CompareAndSwap(ctx, key, []byte(`{"seq":1,"v":1}`), ""); !errors.Is(err, blobtier.ErrPrecondition) {
				t.Fatal(err)
			}
			_, tok, err = b.GetVersioned(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.CompareAndSwap(ctx, key, []byte(`{"seq":5,"v":3}`), tok); err != nil {
				t.Fatal(err)
			}
			if err := b.CompareAndSwap(ctx, key, []byte(`{"seq":3,"v":3}`), tok); !errors.Is(err, blobtier.ErrPrecondition) {
				t.Fatalf("second writer on the same version: %v", err)
			}
			if got, _, _ := b.Get(ctx, key); string(got) != `{"seq":5,"v":3}` {
				t.Fatalf("after CAS: %q", got)
			}
		})
	}
}
