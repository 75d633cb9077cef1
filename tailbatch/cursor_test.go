package tailbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// The encoding is the exact compact form of docs/FORMAT.md §6.6, consumers in name
// order; the golden file pins it.
func TestEncodeCursorGolden(t *testing.T) {
	c := tailbatch.Cursor{V: 3, ShippedThrough: 42, Consumers: map[string]uint64{"projector": 40, "audit-2": 0, "B_x": 42}}
	got, err := tailbatch.EncodeCursor(c)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "cursor.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.TrimRight(want, "\n")) {
		t.Fatalf("encoded\n%s\nwant\n%s", got, want)
	}
	back, err := tailbatch.DecodeCursor(got)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	empty, err := tailbatch.EncodeCursor(tailbatch.Cursor{V: 1})
	if err != nil || string(empty) != `{"v":1,"shipped_through":0,"consumers":{}}` {
		t.Fatalf("no consumers encodes as %s, %v", empty, err)
	}
	if _, err := tailbatch.EncodeCursor(tailbatch.Cursor{V: 1, Consumers: map[string]uint64{"a b": 1}}); !errors.Is(err, tailbatch.ErrBadCursor) {
		t.Fatalf("bad consumer name encoded: %v", err)
	}
}

func TestDecodeCursorStrict(t *testing.T) {
	const max = "18446744073709551615"
	ok := []struct {
		name, body string
		want       tailbatch.Cursor
	}{
		{"canonical", `{"v":2,"shipped_through":9,"consumers":{"a":1,"b":9}}`, tailbatch.Cursor{V: 2, ShippedThrough: 9, Consumers: map[string]uint64{"a": 1, "b": 9}}},
		{"no consumers field", `{"v":1,"shipped_through":0}`, tailbatch.Cursor{V: 1, Consumers: map[string]uint64{}}},
		{"unknown fields ignored", `{"x":[1,{"y":null}],"v":1,"shipped_through":5,"consumers":{},"epoch":"z"}`, tailbatch.Cursor{V: 1, ShippedThrough: 5, Consumers: map[string]uint64{}}},
		{"whitespace", " {\n\"v\" : 1 , \"shipped_through\":3 }\n", tailbatch.Cursor{V: 1, ShippedThrough: 3, Consumers: map[string]uint64{}}},
		{"max uint64", `{"v":` + max + `,"shipped_through":` + max + `}`, tailbatch.Cursor{V: 1<<64 - 1, ShippedThrough: 1<<64 - 1, Consumers: map[string]uint64{}}},
		{"cursor past shipped kept for the reader to clamp", `{"v":1,"shipped_through":3,"consumers":{"c":9}}`, tailbatch.Cursor{V: 1, ShippedThrough: 3, Consumers: map[string]uint64{"c": 9}}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tailbatch.DecodeCursor([]byte(tc.body))
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DecodeCursor = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	bad := []struct{ name, body string }{
		{"empty", ``},
		{"not an object", `[1,2]`},
		{"null", `null`},
		{"missing v", `{"shipped_through":1}`},
		{"missing shipped_through", `{"v":1}`},
		{"field names are exact", `{"V":1,"Shipped_Through":1}`},
		{"negative", `{"v":-1,"shipped_through":1}`},
		{"fraction", `{"v":1.5,"shipped_through":1}`},
		{"exponent", `{"v":1e3,"shipped_through":1}`},
		{"string number", `{"v":"1","shipped_through":1}`},
		{"null number", `{"v":null,"shipped_through":1}`},
		{"overflow", `{"v":18446744073709551616,"shipped_through":1}`},
		{"duplicate field", `{"v":1,"v":2,"shipped_through":1}`},
		{"consumers null", `{"v":1,"shipped_through":1,"consumers":null}`},
		{"consumers array", `{"v":1,"shipped_through":1,"consumers":[]}`},
		{"duplicate consumer", `{"v":1,"shipped_through":1,"consumers":{"a":1,"a":0}}`},
		{"consumer name with a space", `{"v":1,"shipped_through":1,"consumers":{"a b":1}}`},
		{"empty consumer name", `{"v":1,"shipped_through":1,"consumers":{"":1}}`},
		{"long consumer name", `{"v":1,"shipped_through":1,"consumers":{"` + strings.Repeat("a", 257) + `":1}}`},
		{"consumer cursor not a number", `{"v":1,"shipped_through":1,"consumers":{"a":true}}`},
		{"trailing data", `{"v":1,"shipped_through":1} {}`},
		{"trailing garbage", `{"v":1,"shipped_through":1}x`},
		{"unterminated", `{"v":1,"shipped_through":1`},
		{"trailing comma", `{"v":1,"shipped_through":1,}`},
	}
	for _, tc := range bad {
		t.Run("bad/"+tc.name, func(t *testing.T) {
			if got, err := tailbatch.DecodeCursor([]byte(tc.body)); !errors.Is(err, tailbatch.ErrBadCursor) {
				t.Fatalf("DecodeCursor(%q) = %+v, %v; want ErrBadCursor", tc.body, got, err)
			}
		})
	}
}

// FuzzDecodeCursor: the decoder never panics, and whatever it accepts
// encodes to a canonical body that decodes to the same cursor and encodes
// identically again.
func FuzzDecodeCursor(f *testing.F) {
	f.Add([]byte(`{"v":1,"shipped_through":0,"consumers":{}}`))
	f.Add([]byte(`{"v":7,"shipped_through":12,"consumers":{"a":3,"b-2":12}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := tailbatch.DecodeCursor(data)
		if err != nil {
			if !errors.Is(err, tailbatch.ErrBadCursor) {
				t.Fatalf("error %v is not ErrBadCursor", err)
			}
			return
		}
		enc, err := tailbatch.EncodeCursor(c)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", data, err)
		}
		back, err := tailbatch.DecodeCursor(enc)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("re-decode of %q = %+v, %v; want %+v", enc, back, err, c)
		}
		enc2, err := tailbatch.EncodeCursor(back)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not canonical: %q then %q", enc, enc2)
		}
	})
}

func TestReadCursorAbsent(t *testing.T) {
	c, ver, err := tailbatch.ReadCursor(context.Background(), newCASStore(), 4)
	if err != nil || c.V != 0 || c.ShippedThrough != 0 || len(c.Consumers) != 0 || ver != "" {
		t.Fatalf("absent cursor = %+v, %q, %v", c, ver, err)
	}
}

// WriteCursor: V grows by one per write, shipped_through never moves
// backward, and every consumer is clamped to the written shipped_through.
func TestWriteCursorMonotonicAndClamped(t *testing.T) {
	ctx := context.Background()
	for _, cas := range []bool{true, false} {
		name := map[bool]string{true: "compare-and-swap", false: "plain-put"}[cas]
		t.Run(name, func(t *testing.T) {
			st := newCASStore()
			st.noCAS = !cas
			c1, err := tailbatch.WriteCursor(ctx, st, 3, 10, map[string]uint64{"a": 4, "never": 0, "ahead": 99})
			if err != nil {
				t.Fatal(err)
			}
			want := tailbatch.Cursor{V: 1, ShippedThrough: 10, Consumers: map[string]uint64{"a": 4, "never": 0, "ahead": 10}}
			if !reflect.DeepEqual(c1, want) {
				t.Fatalf("first write %+v, want %+v", c1, want)
			}
			// A lower position (a writer that knows less) keeps the stored one.
			c2, err := tailbatch.WriteCursor(ctx, st, 3, 6, map[string]uint64{"a": 8})
			if err != nil {
				t.Fatal(err)
			}
			if c2.V != 2 || c2.ShippedThrough != 10 || c2.Consumers["a"] != 8 {
				t.Fatalf("second write %+v", c2)
			}
			stored, _, err := tailbatch.ReadCursor(ctx, st, 3)
			if err != nil || !reflect.DeepEqual(stored, c2) {
				t.Fatalf("stored %+v, %v; want %+v", stored, err, c2)
			}
			if raw := st.raw(blobtier.CursorKey(3)); string(raw) != `{"v":2,"shipped_through":10,"consumers":{"a":8}}` {
				t.Fatalf("stored body %s", raw)
			}
			if cas && (st.casCalls != 2 || st.putCalls != 0) || !cas && (st.casCalls != 0 || st.putCalls != 2) {
				t.Fatalf("%d compare-and-swaps, %d puts", st.casCalls, st.putCalls)
			}
		})
	}
}

// A lost compare-and-swap race is retried against the new version, and the
// winner's larger shipped_through is kept.
func TestWriteCursorRetriesALostRace(t *testing.T) {
	ctx := context.Background()
	st := newCASStore()
	if _, err := tailbatch.WriteCursor(ctx, st, 0, 5, nil); err != nil {
		t.Fatal(err)
	}
	var fired atomic.Bool
	st.beforeCAS = func() {
		if fired.Swap(true) {
			return
		}
		// Another writer lands first (the hook fires once, so this nested
		// write goes straight through).
		if _, err := tailbatch.WriteCursor(ctx, st, 0, 50, nil); err != nil {
			t.Errorf("competing write: %v", err)
		}
	}
	c, err := tailbatch.WriteCursor(ctx, st, 0, 20, map[string]uint64{"x": 30})
	if err != nil {
		t.Fatal(err)
	}
	if c.V != 3 || c.ShippedThrough != 50 || c.Consumers["x"] != 30 {
		t.Fatalf("after a lost race: %+v; want V 3, shipped_through 50", c)
	}
	if st.casCalls != 4 { // first write, the loser, the competitor, the retry
		t.Fatalf("%d compare-and-swaps, want 4", st.casCalls)
	}
}

// Concurrent writers all succeed (each loses at most once per other
// writer's success), V counts every write, and the largest position wins.
func TestWriteCursorConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	st := newCASStore()
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			if _, err := tailbatch.WriteCursor(ctx, st, 1, uint64(100+w), nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c, _, err := tailbatch.ReadCursor(ctx, st, 1)
	if err != nil || c.V != writers || c.ShippedThrough != 100+writers-1 {
		t.Fatalf("after %d writers: %+v, %v", writers, c, err)
	}
}

// A stored body that does not decode is not overwritten.
func TestWriteCursorReplacesADamagedObject(t *testing.T) {
	ctx := context.Background()
	st := newCASStore()
	key := blobtier.CursorKey(0)
	if err := st.Put(ctx, key, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	// Reading it is an error a restore reports...
	if _, _, err := tailbatch.ReadCursor(ctx, st, 0); !errors.Is(err, tailbatch.ErrBadCursor) {
		t.Fatalf("read of a corrupt cursor: %v", err)
	}
	// ...and the owner's next write replaces it instead of wedging.
	c, err := tailbatch.WriteCursor(ctx, st, 0, 5, map[string]uint64{"c1": 3})
	if err != nil || !c.Repaired {
		t.Fatalf("write over a corrupt cursor: %+v %v", c, err)
	}
	got, _, err := tailbatch.ReadCursor(ctx, st, 0)
	if err != nil || got.ShippedThrough != 5 || got.Consumers["c1"] != 3 || got.V < 1_000_000 {
		t.Fatalf("after the repair: %+v %v", got, err)
	}
	// The next write counts on from the repaired V.
	c2, err := tailbatch.WriteCursor(ctx, st, 0, 6, nil)
	if err != nil || c2.Repaired || c2.V != got.V+1 {
		t.Fatalf("write after the repair: %+v %v", c2, err)
	}
	if _, err := tailbatch.WriteCursor(ctx, st, 1, 5, map[string]uint64{"bad name": 1}); !errors.Is(err, tailbatch.ErrBadCursor) {
		t.Fatalf("invalid consumer name written: %v", err)
	}
}

// checkCursorWithinBucket fails when the shard's cursor object points past
// what the bucket holds contiguously.
func checkCursorWithinBucket(t *testing.T, ctx context.Context, b blobtier.Bucket, shard uint32) (tailbatch.Cursor, error) {
	t.Helper()
	c, _, err := tailbatch.ReadCursor(ctx, b, shard)
	if err != nil {
		t.Fatal(err)
	}
	if m := missing(bucketEvents(t, ctx, b, shard), c.ShippedThrough); len(m) != 0 {
		return c, fmt.Errorf("shipped_through %d is past the bucket: missing %v", c.ShippedThrough, m)
	}
	for name, seq := range c.Consumers {
		if seq > c.ShippedThrough {
			return c, fmt.Errorf("consumer %s at %d points past shipped_through %d", name, seq, c.ShippedThrough)
		}
	}
	return c, nil
}

// CHECKLIST §4.12: the cursor object never points past what the bucket
// holds. A random run of appends, consumer pulls and acks (some far ahead
// of what shipped), and passes against a bucket that refuses some tail
// puts: after every pass the cursor object's shipped_through is covered by
// the bucket and every consumer (a never-acked one included, at 0) is
// clamped to it.
func TestCursorObjectNeverPointsPastTheBucket(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, localseg.Options{SegmentMaxBytes: 4 << 10})
	b := newTestBucket(newMemBucket(t))
	// Small batches and two per pass: a pass often ships only part of the
	// durable tail, so consumers acked to the local tip are ahead of what
	// the bucket holds when the cursor object is written.
	r := tailbatch.New(0, 0, tailbatch.Options{MaxBatchBytes: 512, MaxBatchesPerPass: 2})
	rng := rand.New(rand.NewPCG(1, 2))
	var refuse bool
	var mu sync.Mutex
	b.setBefore(func(op, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == opPutIfAbsent && refuse {
			return errRefused
		}
		return nil
	})
	appendN(t, s, 3)
	if _, err := s.Pull("never", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pull("eager", 1); err != nil {
		t.Fatal(err)
	}
	written, clampedWrites := 0, 0
	for step := range 60 {
		appendN(t, s, 1+rng.IntN(8))
		// eager acks everything it has seen locally, far past what shipped.
		if _, err := s.Pull("eager", 1000); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Ack("eager", s.Tip()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		refuse = rng.IntN(3) == 0
		mu.Unlock()
		res, err := r.Replicate(ctx, s, b)
		if err != nil && !errors.Is(err, errRefused) {
			t.Fatalf("step %d: %v", step, err)
		}
		if res.CursorWritten {
			written++
		}
		c, err := checkCursorWithinBucket(t, ctx, b, 0)
		if err != nil {
			t.Fatalf("step %d: %v (cursor %+v)", step, err, c)
		}
		if res.CursorWritten {
			if s.Tip() > c.ShippedThrough {
				clampedWrites++
			}
			if _, ok := c.Consumers["never"]; !ok || c.Consumers["never"] != 0 {
				t.Fatalf("step %d: the never-acked consumer is missing or not 0: %+v", step, c)
			}
			if c.Consumers["eager"] != c.ShippedThrough || c.ShippedThrough != r.ShippedThrough() {
				t.Fatalf("step %d: eager %d not clamped to shipped_through %d (cursor %d)", step, c.Consumers["eager"], c.ShippedThrough, r.ShippedThrough())
			}
		}
	}
	if written < 10 || r.Stats().Failed == 0 || clampedWrites == 0 {
		t.Fatalf("weak run: %d cursor writes (%d with a consumer ahead of the bucket), %d failures", written, clampedWrites, r.Stats().Failed)
	}

	// RED control for the checker itself: a cursor written with the local
	// tip while the bucket refuses tail puts is caught.
	mu.Lock()
	refuse = true
	mu.Unlock()
	appendN(t, s, 4)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Replicate(ctx, s, b); !errors.Is(err, errRefused) {
		t.Fatalf("refused pass: %v", err)
	}
	if _, err := tailbatch.WriteCursor(ctx, b, 0, s.Tip(), maps.Clone(snap.Consumers)); err != nil {
		t.Fatal(err)
	}
	if _, err := checkCursorWithinBucket(t, ctx, b, 0); err == nil {
		t.Fatal("RED: a cursor object at the local tip past the bucket went unnoticed")
	}
}
