package memcas_test

import (
	"context"
	"testing"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/backendtest"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
)

// TestConformance runs blobtier's backend suite on memcas, directly and
// under faultbucket with no rules (which must keep compare-and-swap).
func TestConformance(t *testing.T) {
	raws := map[blobtier.Bucket]*memcas.Bucket{}
	putRaw := func(t *testing.T, b blobtier.Bucket, key string, data []byte, meta map[string]string) {
		d := raws[b]
		pb := blob.NewBucket(d)
		if err := pb.WriteAll(context.Background(), key, data, &blob.WriterOptions{ContentType: "application/octet-stream", Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
	caps := backendtest.Caps{CAS: true, Races: true, PutRaw: putRaw}
	t.Run("Direct", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			d := memcas.New(nil)
			b := blobtier.New(blob.NewBucket(d), blobtier.Options{})
			raws[b] = d
			return b
		}, caps)
	})
	t.Run("UnderFaultbucket", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			d := memcas.New(nil)
			b := blobtier.New(faultbucket.NewDriver(d, 1).Bucket(), blobtier.Options{})
			raws[b] = d
			return b
		}, caps)
	})
}

func TestVersionChangesOnEveryWrite(t *testing.T) {
	ctx := context.Background()
	b := blobtier.New(memcas.OpenBucket(nil), blobtier.Options{})
	if !b.CanCAS() {
		t.Fatal("memcas bucket cannot compare-and-swap")
	}
	key := blobtier.WatermarkKey(0)
	if err := b.CompareAndSwap(ctx, key, []byte("a"), ""); err != nil {
		t.Fatal(err)
	}
	_, v1, err := b.GetVersioned(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CompareAndSwap(ctx, key, []byte("a"), v1); err != nil {
		t.Fatal(err)
	}
	_, v2, _ := b.GetVersioned(ctx, key)
	if v1 == v2 {
		t.Fatalf("identical rewrite kept version %q", v1)
	}
	if err := b.CompareAndSwap(ctx, key, []byte("b"), v1); err == nil {
		t.Fatal("a compare-and-swap on a stale version landed")
	}
}
