package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/blobtier"
)

// TestServeStatusSegmentsEvicted: with a local budget the evicted segments
// are counted remote, not local.
func TestServeStatusSegmentsEvicted(t *testing.T) {
	ctx := context.Background()
	b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
	defer b.Close()
	opts := bucketlog.Options{Dir: t.TempDir(), SegmentMaxBytes: 4096, NoBackground: true, Logger: quietLogger(), Bucket: b, LocalRetentionBytes: 4096}
	l, err := bucketlog.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := newAPI(apiConfig{own: affinity.SingleOwner, maxBody: defaultMaxBody, maxPage: defaultMaxPageBytes})
	a.setLog(l)
	for i := range 80 {
		if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", fmt.Sprint("t", i), strings.Repeat("x", 300))); code != http.StatusCreated {
			t.Fatalf("append %d: %d %v", i, code, out)
		}
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	st := statusOf(t, a)
	local, _ := st["segments_local"].(float64)
	durable, _ := st["segments_durable"].(float64)
	remote, _ := st["segments_remote"].(float64)
	if remote < 2 || local+remote != durable+1 {
		t.Fatalf("segment counts with a 4 KiB budget: local %v remote %v durable %v: %v", local, remote, durable, st)
	}
}

// TestServeStatusSegments: /v1/status counts the segments on the local
// disk, those the bucket holds as durable segments, and those held only by
// the bucket (segments_remote: 0 while nothing evicts local segments);
// without a bucket the two bucket counts are 0, never absent.
func TestServeStatusSegments(t *testing.T) {
	ctx := context.Background()
	for _, withBucket := range []bool{true, false} {
		t.Run(fmt.Sprint("bucket=", withBucket), func(t *testing.T) {
			opts := bucketlog.Options{Dir: t.TempDir(), SegmentMaxBytes: 4096, NoBackground: true, Logger: quietLogger()}
			if withBucket {
				b := blobtier.New(memblob.OpenBucket(nil), blobtier.Options{})
				defer b.Close()
				opts.Bucket = b
			}
			l, err := bucketlog.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			a := newAPI(apiConfig{own: affinity.SingleOwner, maxBody: defaultMaxBody, maxPage: defaultMaxPageBytes})
			a.setLog(l)
			for i := range 40 {
				if code, out := call(t, a, "POST", "/v1/events", eventJSON("1", fmt.Sprint("t", i), strings.Repeat("x", 300))); code != http.StatusCreated {
					t.Fatalf("append %d: %d %v", i, code, out)
				}
			}
			if withBucket {
				if _, err := l.Ship(ctx, false); err != nil {
					t.Fatal(err)
				}
			}
			st := statusOf(t, a)
			local, _ := st["segments_local"].(float64)
			durable, okD := st["segments_durable"].(float64)
			remote, okR := st["segments_remote"].(float64)
			if !okD || !okR || local < 3 || remote != 0 {
				t.Fatalf("segment counts: %v", st)
			}
			if want := local - 1; withBucket && durable != want { // every sealed one shipped, the active one not
				t.Fatalf("segments_durable %v, want the %v sealed ones: %v", durable, want, st)
			}
			if !withBucket && durable != 0 {
				t.Fatalf("segments_durable without a bucket: %v", st)
			}
		})
	}
}
