package buckets

import (
	"context"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestDelayTransportDelaysAndCountsEveryRequest: each request through an
// OpenDelayed bucket takes at least the delay, and the transport counts it
// under the name a price list bills it by.
func TestDelayTransportDelaysAndCountsEveryRequest(t *testing.T) {
	emu, err := StartS3()
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	name, err := emu.NewBucket("delay")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const delay = 30 * time.Millisecond
	b, tr, err := emu.OpenDelayed(ctx, name, delay)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key := blobtier.SegmentKey(0, 1)
	start := time.Now()
	if err := b.Put(ctx, key, []byte("payload")); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < delay {
		t.Fatalf("a put took %v, less than the injected %v", el, delay)
	}
	if _, err := b.Stat(ctx, key); err != nil {
		t.Fatal(err)
	}
	for _, err := range b.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			t.Fatal(err)
		}
	}
	m := tr.Methods()
	if m["PUT"] < 1 || m["HEAD"] < 1 || m["LIST"] < 1 {
		t.Fatalf("requests by method %v: want at least one PUT, HEAD and LIST", m)
	}
	if m["GET"] != 0 {
		t.Fatalf("a listing was counted as a GET: %v", m)
	}
}
