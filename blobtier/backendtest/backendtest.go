// Package backendtest is the one conformance suite every bucket blobtier
// runs on must pass: memblob, fileblob, gofakes3 and fake-gcs-server (and a
// real S3 or GCS bucket, if one is handed to it). It checks the contract of
// blobtier.Bucket, not gocloud's: write-once with identical re-puts,
// create-if-absent and compare-and-swap races, verified reads of objects
// broken at rest, listings isolated by shard and kind, idempotent deletes,
// the size limit and per-call deadlines.
//
// Run is called from a test with a constructor of fresh buckets and the
// capabilities of the backend; cases a backend cannot support are skipped
// and say why. The suite runs its cases one after another (it starts
// goroutines only inside the race cases, and waits for them).
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog/blobtier"
)

// Racers is how many writers the race cases start at once.
const Racers = 16

// Caps describes what a backend can do.
type Caps struct {
	// CAS: CompareAndSwap works (S3, GCS). Without it, the suite checks
	// that CanCAS is false and CompareAndSwap returns ErrUnsupported.
	CAS bool
	// Races: create-if-absent is atomic, so the race cases are meaningful
	// (false for fileblob, whose create-if-absent is stat-then-rename).
	Races bool
	// PutRaw writes an object at rest into the bucket b was made on,
	// bypassing blobtier (through the emulator's backend, or the raw
	// *blob.Bucket with forged metadata). Nil skips the cases of corrupt or
	// foreign objects.
	PutRaw func(t *testing.T, b blobtier.Bucket, key string, data []byte, meta map[string]string)
	// Hung returns a Bucket, with the given per-call timeout, whose server
	// never answers. Nil skips the deadline case.
	Hung func(t *testing.T, timeout time.Duration) blobtier.Bucket
}

// Run runs the suite. newBucket returns a fresh, empty bucket for each case;
// the suite closes it.
func Run(t *testing.T, newBucket func(t *testing.T) blobtier.Bucket, caps Caps) {
	cases := []struct {
		name string
		run  func(t *testing.T, b blobtier.Bucket, caps Caps)
		skip string
	}{
		{"PutGetStat", testPutGetStat, ""},
		{"EmptyObject", testEmptyObject, ""},
		{"Missing", testMissing, ""},
		{"IdenticalRePut", testIdenticalRePut, ""},
		{"DifferentRePutConflict", testDifferentRePut, ""},
		{"CreateIfAbsentRace", testCreateRace, skipUnless(caps.Races, "create-if-absent is not atomic here")},
		{"CreateIfAbsentRaceIdentical", testCreateRaceIdentical, skipUnless(caps.Races, "create-if-absent is not atomic here")},
		{"CompareAndSwap", testCAS, skipUnless(caps.CAS, "no compare-and-swap")},
		{"CompareAndSwapRace", testCASRace, skipUnless(caps.CAS, "no compare-and-swap")},
		{"CompareAndSwapAfterDelete", testCASAfterDelete, skipUnless(caps.CAS, "no compare-and-swap")},
		{"CompareAndSwapUnsupported", testCASUnsupported, skipUnless(!caps.CAS, "compare-and-swap works")},
		{"PutOverwrites", testPutOverwrites, ""},
		{"VerifiedGet", testVerifiedGet, skipUnless(caps.PutRaw != nil, "no raw write hook")},
		{"VerifiedGetBuffered", testVerifiedGetBuffered, skipUnless(caps.PutRaw != nil, "no raw write hook")},
		{"VerifiedGetWatched", testVerifiedGetWatched, skipUnless(caps.PutRaw != nil, "no raw write hook")},
		{"AtRestDamageIsNotIdentical", testAtRestDamage, skipUnless(caps.PutRaw != nil, "no raw write hook")},
		{"GetRange", testGetRange, ""},
		{"ListByShardAndKind", testList, ""},
		{"ListFlagsUnparsedKeys", testListUnparsed, skipUnless(caps.PutRaw != nil, "no raw write hook")},
		{"ListStopsWhenAsked", testListStop, ""},
		{"DeleteIdempotent", testDelete, ""},
		{"TooLarge", testTooLarge, ""},
		{"BadKeyRefused", testBadKey, ""},
		{"Canceled", testCanceled, ""},
		{"Closed", testClosed, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			b := newBucket(t)
			defer b.Close()
			c.run(t, b, caps)
		})
	}
	t.Run("Deadline", func(t *testing.T) {
		if caps.Hung == nil {
			t.Skip("no hung server")
		}
		testDeadline(t, caps)
	})
}

func skipUnless(ok bool, why string) string {
	if ok {
		return ""
	}
	return why
}

// hangGuard bounds a case that must end by itself: the limit is generous
// and only catches hangs, never slowness.
const hangGuard = 2 * time.Minute

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// body returns n deterministic bytes that differ with seed.
func body(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func wantErr(t *testing.T, what string, err, target error, key string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
	if key != "" && !strings.Contains(err.Error(), key) {
		t.Fatalf("%s: error %q does not name the key %s", what, err, key)
	}
}

func mustGet(t *testing.T, b blobtier.Bucket, key string, want []byte) blobtier.Meta {
	t.Helper()
	got, m, err := b.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%s) = %d bytes, want %d bytes (equal: false)", key, len(got), len(want))
	}
	return m
}

func testPutGetStat(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.SegmentKey(1, 7)
	data := body(1, 4096)
	if err := b.PutIfAbsent(ctx, key, data, 0); err != nil {
		t.Fatal(err)
	}
	want := blobtier.Meta{Length: 4096, XXH64: blobtier.Digest(data)}
	if m := mustGet(t, b, key, data); m != want {
		t.Fatalf("Get meta = %+v, want %+v", m, want)
	}
	got, v, err := b.GetVersioned(ctx, key)
	if err != nil || !bytes.Equal(got, data) || v == "" {
		t.Fatalf("GetVersioned = %d bytes, version %q, %v", len(got), v, err)
	}
	info, err := b.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wantInfo := blobtier.ObjectInfo{Key: key, Size: 4096, Meta: want, Parsed: blobtier.Key{Kind: blobtier.KindSegment, Shard: 1, Segment: 7}}
	if info != wantInfo {
		t.Fatalf("Stat = %+v, want %+v", info, wantInfo)
	}
	// The epoch round-trips.
	tail := blobtier.TailKey(1, 1, 9)
	if err := b.PutIfAbsent(ctx, tail, data[:100], 0xabc); err != nil {
		t.Fatal(err)
	}
	if m := mustGet(t, b, tail, data[:100]); m.Epoch != 0xabc {
		t.Fatalf("epoch = %x, want abc", m.Epoch)
	}
}

func testEmptyObject(t *testing.T, b blobtier.Bucket, _ Caps) {
	key := blobtier.TailKey(0, 1, 1)
	if err := b.PutIfAbsent(ctxFor(t), key, nil, 0); err != nil {
		t.Fatal(err)
	}
	if m := mustGet(t, b, key, nil); m.Length != 0 {
		t.Fatalf("length = %d", m.Length)
	}
	if err := b.PutIfAbsent(ctxFor(t), key, []byte{}, 0); err != nil {
		t.Fatalf("identical empty re-put: %v", err)
	}
}

func testMissing(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.SegmentKey(3, 3)
	_, _, err := b.Get(ctx, key)
	wantErr(t, "Get of a missing key", err, blobtier.ErrNotFound, key)
	_, _, err = b.GetVersioned(ctx, key)
	wantErr(t, "GetVersioned of a missing key", err, blobtier.ErrNotFound, key)
	_, err = b.Stat(ctx, key)
	wantErr(t, "Stat of a missing key", err, blobtier.ErrNotFound, key)
}

func testIdenticalRePut(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.SegmentKey(2, 1)
	data := body(2, 1000)
	for i := range 3 {
		if err := b.PutIfAbsent(ctx, key, data, 5); err != nil {
			t.Fatalf("put #%d of identical bytes: %v", i+1, err)
		}
	}
	mustGet(t, b, key, data)
}

func testDifferentRePut(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.SegmentKey(2, 2)
	data := body(3, 1000)
	if err := b.PutIfAbsent(ctx, key, data, 0); err != nil {
		t.Fatal(err)
	}
	other := bytes.Clone(data)
	other[500] ^= 0x40
	wantErr(t, "re-put with one byte changed", b.PutIfAbsent(ctx, key, other, 0), blobtier.ErrConflict, key)
	wantErr(t, "re-put shorter", b.PutIfAbsent(ctx, key, data[:999], 0), blobtier.ErrConflict, key)
	wantErr(t, "re-put with another epoch", b.PutIfAbsent(ctx, key, data, 1), blobtier.ErrConflict, key)
	// Never overwritten.
	if m := mustGet(t, b, key, data); m.Epoch != 0 {
		t.Fatalf("epoch changed to %d", m.Epoch)
	}
}

// race starts Racers goroutines at once and returns their errors.
func race(f func(i int) error) []error {
	errs := make([]error, Racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range Racers {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = f(i)
		}()
	}
	start.Done()
	done.Wait()
	return errs
}

func testCreateRace(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.SegmentKey(4, 1)
	errs := race(func(i int) error { return b.PutIfAbsent(ctx, key, body(100+i, 2048), 0) })
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both created %s", winner, i, key)
			}
			winner = i
		case !errors.Is(err, blobtier.ErrConflict):
			t.Fatalf("writer %d: %v, want ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer won: %v", errs)
	}
	mustGet(t, b, key, body(100+winner, 2048))
}

func testCreateRaceIdentical(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.TailKey(4, 10, 20)
	data := body(7, 2048)
	for i, err := range race(func(int) error { return b.PutIfAbsent(ctx, key, data, 0) }) {
		if err != nil {
			t.Fatalf("writer %d of identical bytes: %v", i, err)
		}
	}
	mustGet(t, b, key, data)
}

func testCAS(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	if !b.CanCAS() {
		t.Fatal("CanCAS() = false")
	}
	key := blobtier.WatermarkKey(5)
	v1 := []byte(`{"seq":10,"segment":1,"v":1}`)
	if err := b.CompareAndSwap(ctx, key, v1, ""); err != nil {
		t.Fatalf("create when absent: %v", err)
	}
	wantErr(t, "create when present", b.CompareAndSwap(ctx, key, []byte(`{"v":99}`), ""), blobtier.ErrPrecondition, key)
	got, tok1, err := b.GetVersioned(ctx, key)
	if err != nil || !bytes.Equal(got, v1) || tok1 == "" {
		t.Fatalf("GetVersioned = %q, %q, %v", got, tok1, err)
	}
	v2 := []byte(`{"seq":20,"segment":2,"v":2}`)
	if err := b.CompareAndSwap(ctx, key, v2, tok1); err != nil {
		t.Fatalf("swap on the current version: %v", err)
	}
	wantErr(t, "swap on a stale version", b.CompareAndSwap(ctx, key, []byte(`{"seq":30,"segment":3,"v":3}`), tok1), blobtier.ErrPrecondition, key)
	got, tok2, err := b.GetVersioned(ctx, key)
	if err != nil || !bytes.Equal(got, v2) {
		t.Fatalf("after the stale swap: %q, %v; want %q", got, err, v2)
	}
	if tok2 == tok1 {
		t.Fatalf("version token did not change: %q", tok2)
	}
	mustGet(t, b, key, v2)
}

func testCASRace(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.CursorKey(6)
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":0}`), ""); err != nil {
		t.Fatal(err)
	}
	_, tok, err := b.GetVersioned(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bodyOf := func(i int) []byte { return fmt.Appendf(nil, `{"v":1,"writer":%d}`, i) }
	errs := race(func(i int) error { return b.CompareAndSwap(ctx, key, bodyOf(i), tok) })
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both swapped %s on one version", winner, i, key)
			}
			winner = i
		case !errors.Is(err, blobtier.ErrPrecondition):
			t.Fatalf("writer %d: %v, want ErrPrecondition", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer won: %v", errs)
	}
	mustGet(t, b, key, bodyOf(winner))
	// Every loser's token is stale now.
	wantErr(t, "swap on the pre-race version", b.CompareAndSwap(ctx, key, []byte(`{"v":2}`), tok), blobtier.ErrPrecondition, key)

	// Creates race the same way.
	key = blobtier.CursorKey(7)
	errs = race(func(i int) error { return b.CompareAndSwap(ctx, key, bodyOf(i), "") })
	winners := 0
	for i, err := range errs {
		if err == nil {
			winners++
		} else if !errors.Is(err, blobtier.ErrPrecondition) {
			t.Fatalf("creator %d: %v, want ErrPrecondition", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d creators won, want 1", winners)
	}
}

func testCASAfterDelete(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.WatermarkKey(8)
	if err := b.CompareAndSwap(ctx, key, []byte(`{"v":1}`), ""); err != nil {
		t.Fatal(err)
	}
	_, tok, err := b.GetVersioned(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "swap of a deleted object", b.CompareAndSwap(ctx, key, []byte(`{"v":2}`), tok), blobtier.ErrPrecondition, key)
	if _, err := b.Stat(ctx, key); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("the refused swap created the object: %v", err)
	}
}

func testCASUnsupported(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	if b.CanCAS() {
		t.Fatal("CanCAS() = true on a backend declared without compare-and-swap")
	}
	key := blobtier.CursorKey(1)
	wantErr(t, "CompareAndSwap", b.CompareAndSwap(ctx, key, []byte(`{"v":1}`), ""), blobtier.ErrUnsupported, key)
	if _, err := b.Stat(ctx, key); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("the unsupported swap wrote something: %v", err)
	}
	// The owner's plain put still gives a version (present = non-empty).
	if err := b.Put(ctx, key, []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, tok, err := b.GetVersioned(ctx, key); err != nil || tok == "" {
		t.Fatalf("GetVersioned = %q, %v", tok, err)
	}
}

func testPutOverwrites(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.CursorKey(9)
	for i := range 3 {
		data := fmt.Appendf(nil, `{"v":%d,"shipped_through":%d}`, i, i*10)
		if err := b.Put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		mustGet(t, b, key, data)
	}
}

// corruptions are objects broken at rest, each with the metadata it is
// stored with, derived from a good body and its metadata.
func corruptions(data []byte) map[string]struct {
	data []byte
	meta map[string]string
} {
	good := blobtier.MetaOf(data, 0).Encode()
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x01
	without := func(k string) map[string]string {
		m := maps(good)
		delete(m, k)
		return m
	}
	with := func(k, v string) map[string]string {
		m := maps(good)
		m[k] = v
		return m
	}
	type obj = struct {
		data []byte
		meta map[string]string
	}
	return map[string]obj{
		"truncated":            {data[:len(data)-1], good},
		"truncated to nothing": {nil, good},
		"extended":             {append(bytes.Clone(data), 0), good},
		"flipped byte":         {flipped, good},
		"no metadata":          {data, nil},
		"no xxh64":             {data, without("xxh64")},
		"no length":            {data, without("length")},
		"malformed xxh64":      {data, with("xxh64", "not-a-digest")},
		"malformed length":     {data, with("length", "ten")},
		"malformed epoch":      {data, with("epoch", "1")},
		"length over limit":    {data, with("length", fmt.Sprint(blobtier.MaxObjectBytes+1))},
	}
}

func maps(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// CHECKLIST §3.3: a short object, a longer object and a flipped byte are
// each a hard error on get, naming the key.
func testVerifiedGet(t *testing.T, b blobtier.Bucket, caps Caps) {
	ctx := ctxFor(t)
	data := body(9, 3000)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range corruptions(data) {
			if !yield(n) {
				return
			}
		}
	})
	all := corruptions(data)
	for i, name := range names {
		c := all[name]
		key := blobtier.SegmentKey(10, uint64(i+1))
		caps.PutRaw(t, b, key, c.data, c.meta)
		_, _, err := b.Get(ctx, key)
		wantErr(t, "Get of "+name, err, blobtier.ErrCorrupt, key)
		_, _, err = b.GetVersioned(ctx, key)
		wantErr(t, "GetVersioned of "+name, err, blobtier.ErrCorrupt, key)
	}
	// The control: the same raw path with honest metadata reads back.
	key := blobtier.SegmentKey(10, 999)
	caps.PutRaw(t, b, key, data, blobtier.MetaOf(data, 0).Encode())
	mustGet(t, b, key, data)
}

// A write-once object damaged at rest (its metadata intact) is not the
// object we hold: a re-put must not count it as durable. It is our own
// object landed damaged (ErrCorrupt), not a second writer's (ErrConflict):
// the caller deletes it and puts again.
func testAtRestDamage(t *testing.T, b blobtier.Bucket, caps Caps) {
	ctx := ctxFor(t)
	data := body(11, 2000)
	key := blobtier.SegmentKey(11, 1)
	caps.PutRaw(t, b, key, data[:1000], blobtier.MetaOf(data, 0).Encode())
	err := b.PutIfAbsent(ctx, key, data, 0)
	wantErr(t, "re-put over a truncated object", err, blobtier.ErrCorrupt, key)
	if errors.Is(err, blobtier.ErrConflict) {
		t.Errorf("re-put over our own truncated object: %v is taken for a second writer", err)
	}
	// A foreign object without our metadata is a conflict too.
	key = blobtier.SegmentKey(11, 2)
	caps.PutRaw(t, b, key, data, nil)
	wantErr(t, "re-put over an object without metadata", b.PutIfAbsent(ctx, key, data, 0), blobtier.ErrConflict, key)
}

func collect(t *testing.T, b blobtier.Bucket, shard uint32, kind blobtier.Kind) []blobtier.ObjectInfo {
	t.Helper()
	var out []blobtier.ObjectInfo
	for info, err := range b.List(ctxFor(t), shard, kind) {
		if err != nil {
			t.Fatalf("List(%d, %v): %v", shard, kind, err)
		}
		out = append(out, info)
	}
	return out
}

func keysOf(infos []blobtier.ObjectInfo) []string {
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	return ks
}

// CHECKLIST §3.2 (shards isolated in listings) and §4.3 (a tail object is
// never listed as a segment).
func testList(t *testing.T, b blobtier.Bucket, caps Caps) {
	ctx := ctxFor(t)
	put := func(key string, n int) {
		t.Helper()
		var err error
		if k, _ := blobtier.ParseKey(key); k.Kind == blobtier.KindWatermark || k.Kind == blobtier.KindCursor {
			err = b.Put(ctx, key, body(n, n))
		} else {
			err = b.PutIfAbsent(ctx, key, body(n, n), 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Written out of order; shard 1 and shard 0x10 share a leading digit
	// pattern with shard 0x100 in decimal-minded prefixes.
	var want1 []string
	for _, id := range []uint64{3, 1, 0x10, 2, 0xff, 1 << 40} {
		put(blobtier.SegmentKey(1, id), int(id%97)+1)
		want1 = append(want1, blobtier.SegmentKey(1, id))
	}
	slices.Sort(want1)
	put(blobtier.SegmentKey(0x10, 1), 5)
	put(blobtier.SegmentKey(0x100, 1), 6)
	put(blobtier.SegmentKey(2, 1), 7)
	put(blobtier.TailKey(1, 1, 5), 8)
	put(blobtier.TailKey(1, 6, 6), 9)
	put(blobtier.TailKey(2, 1, 1), 10)
	put(blobtier.WatermarkKey(1), 11)
	put(blobtier.CursorKey(1), 12)
	put(blobtier.WatermarkKey(0x10), 13)

	segs := collect(t, b, 1, blobtier.KindSegment)
	if got := keysOf(segs); !slices.Equal(got, want1) {
		t.Fatalf("segments of shard 1 = %v, want %v (in key order)", got, want1)
	}
	for _, s := range segs {
		if s.ParseErr != nil || s.Parsed.Kind != blobtier.KindSegment || s.Parsed.Shard != 1 {
			t.Fatalf("listed %+v", s)
		}
		if s.Size != int64(s.Parsed.Segment%97)+1 {
			t.Fatalf("%s: size %d", s.Key, s.Size)
		}
	}
	if got, want := keysOf(collect(t, b, 0x10, blobtier.KindSegment)), []string{blobtier.SegmentKey(0x10, 1)}; !slices.Equal(got, want) {
		t.Fatalf("segments of shard 0x10 = %v, want %v", got, want)
	}
	if got, want := keysOf(collect(t, b, 2, blobtier.KindSegment)), []string{blobtier.SegmentKey(2, 1)}; !slices.Equal(got, want) {
		t.Fatalf("segments of shard 2 = %v, want %v", got, want)
	}
	if got := collect(t, b, 3, blobtier.KindSegment); len(got) != 0 {
		t.Fatalf("segments of an empty shard = %v", keysOf(got))
	}
	tails := collect(t, b, 1, blobtier.KindTail)
	if got, want := keysOf(tails), []string{blobtier.TailKey(1, 1, 5), blobtier.TailKey(1, 6, 6)}; !slices.Equal(got, want) {
		t.Fatalf("tails of shard 1 = %v, want %v", got, want)
	}
	if tails[0].Parsed != (blobtier.Key{Kind: blobtier.KindTail, Shard: 1, FirstSeq: 1, LastSeq: 5}) {
		t.Fatalf("parsed tail = %+v", tails[0].Parsed)
	}
	if got, want := keysOf(collect(t, b, 1, blobtier.KindWatermark)), []string{blobtier.WatermarkKey(1)}; !slices.Equal(got, want) {
		t.Fatalf("watermark of shard 1 = %v, want %v", got, want)
	}
	if got, want := keysOf(collect(t, b, 1, blobtier.KindCursor)), []string{blobtier.CursorKey(1)}; !slices.Equal(got, want) {
		t.Fatalf("cursor of shard 1 = %v, want %v", got, want)
	}
	if got := collect(t, b, 2, blobtier.KindWatermark); len(got) != 0 {
		t.Fatalf("watermark of shard 2 = %v", keysOf(got))
	}
	for info, err := range b.List(ctx, 1, blobtier.Kind(0)) {
		if err == nil {
			t.Fatalf("List of kind 0 yielded %+v", info)
		}
	}
}

func testListUnparsed(t *testing.T, b blobtier.Bucket, caps Caps) {
	ctx := ctxFor(t)
	good := blobtier.TailKey(1, 1, 2)
	if err := b.PutIfAbsent(ctx, good, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	foreign := []string{
		"noetl.ehdb.tail.00000001.0000000000000005.0000000000000001", // first > last
		"noetl.ehdb.tail.00000001.000000000000000A.000000000000000B", // uppercase
		"noetl.ehdb.tail.00000001.backup",
		"noetl.ehdb.tail.00000001.0000000000000001.0000000000000002.old",
	}
	for _, k := range foreign {
		caps.PutRaw(t, b, k, []byte("foreign"), nil)
	}
	caps.PutRaw(t, b, "noetl.ehdb.seg.00000001.garbage", []byte("foreign"), nil)
	got := collect(t, b, 1, blobtier.KindTail)
	want := slices.Sorted(slices.Values(append([]string{good}, foreign...)))
	if !slices.Equal(keysOf(got), want) {
		t.Fatalf("tails = %v, want %v", keysOf(got), want)
	}
	for _, info := range got {
		if (info.Key == good) != (info.ParseErr == nil) {
			t.Fatalf("%s: ParseErr = %v", info.Key, info.ParseErr)
		}
		if info.ParseErr != nil && !errors.Is(info.ParseErr, blobtier.ErrBadKey) {
			t.Fatalf("%s: ParseErr %v does not wrap ErrBadKey", info.Key, info.ParseErr)
		}
		if info.Size != int64(len("foreign")) && info.Key != good {
			t.Fatalf("%s: size %d", info.Key, info.Size)
		}
	}
	segs := collect(t, b, 1, blobtier.KindSegment)
	if len(segs) != 1 || segs[0].ParseErr == nil {
		t.Fatalf("segments = %+v, want the one unparsed key", segs)
	}
}

func testListStop(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	for id := uint64(1); id <= 5; id++ {
		if err := b.PutIfAbsent(ctx, blobtier.SegmentKey(0, id), []byte{byte(id)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, err := range b.List(ctx, 0, blobtier.KindSegment) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("iterated %d", n)
	}
}

func testDelete(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	key := blobtier.TailKey(12, 1, 3)
	if err := b.PutIfAbsent(ctx, key, []byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.Delete(ctx, key); err != nil {
			t.Fatalf("delete #%d: %v", i+1, err)
		}
	}
	_, _, err := b.Get(ctx, key)
	wantErr(t, "Get after delete", err, blobtier.ErrNotFound, key)
	if err := b.Delete(ctx, blobtier.SegmentKey(12, 12345)); err != nil {
		t.Fatalf("delete of a never-written key: %v", err)
	}
	if got := collect(t, b, 12, blobtier.KindTail); len(got) != 0 {
		t.Fatalf("listed after delete: %v", keysOf(got))
	}
	// The key is free again.
	if err := b.PutIfAbsent(ctx, key, []byte("abcd"), 0); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

func testTooLarge(t *testing.T, b blobtier.Bucket, caps Caps) {
	ctx := ctxFor(t)
	big := make([]byte, blobtier.MaxObjectBytes+1)
	key := blobtier.SegmentKey(13, 1)
	wantErr(t, "PutIfAbsent over the limit", b.PutIfAbsent(ctx, key, big, 0), blobtier.ErrTooLarge, key)
	wantErr(t, "Put over the limit", b.Put(ctx, blobtier.CursorKey(13), big), blobtier.ErrTooLarge, "")
	err := b.CompareAndSwap(ctx, blobtier.WatermarkKey(13), big, "")
	if caps.CAS {
		wantErr(t, "CompareAndSwap over the limit", err, blobtier.ErrTooLarge, "")
	} else if err == nil {
		t.Fatal("CompareAndSwap over the limit succeeded")
	}
	for _, k := range []string{key, blobtier.CursorKey(13), blobtier.WatermarkKey(13)} {
		if _, err := b.Stat(ctx, k); !errors.Is(err, blobtier.ErrNotFound) {
			t.Fatalf("%s exists after refused writes: %v", k, err)
		}
	}
	// Exactly the limit is allowed and reads back verified.
	atLimit := body(13, blobtier.MaxObjectBytes)
	if err := b.PutIfAbsent(ctx, key, atLimit, 0); err != nil {
		t.Fatalf("PutIfAbsent of exactly MaxObjectBytes: %v", err)
	}
	mustGet(t, b, key, atLimit)
	if err := b.PutIfAbsent(ctx, key, atLimit, 0); err != nil {
		t.Fatalf("identical re-put of exactly MaxObjectBytes: %v", err)
	}
}

func testBadKey(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx := ctxFor(t)
	for _, key := range []string{"", "segment-1", "noetl.ehdb.seg.1.2", strings.ToUpper(blobtier.SegmentKey(1, 1)), blobtier.TailKey(1, 2, 1)} {
		wantErr(t, "PutIfAbsent("+key+")", b.PutIfAbsent(ctx, key, []byte("x"), 0), blobtier.ErrBadKey, "")
		wantErr(t, "Put("+key+")", b.Put(ctx, key, []byte("x")), blobtier.ErrBadKey, "")
	}
}

func testCanceled(t *testing.T, b blobtier.Bucket, _ Caps) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	key := blobtier.SegmentKey(14, 1)
	if err := b.PutIfAbsent(ctx, key, []byte("x"), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutIfAbsent with a canceled context: %v", err)
	}
	if _, _, err := b.Get(ctx, key); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a canceled context: %v", err)
	}
	for _, err := range b.List(ctx, 14, blobtier.KindSegment) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("List with a canceled context: %v", err)
		}
	}
	if _, err := b.Stat(ctxFor(t), key); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("a canceled put wrote %s: %v", key, err)
	}
}

func testClosed(t *testing.T, b blobtier.Bucket, _ Caps) {
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	key := blobtier.SegmentKey(15, 1)
	wantErr(t, "PutIfAbsent after Close", b.PutIfAbsent(ctxFor(t), key, []byte("x"), 0), blobtier.ErrClosed, "")
	_, _, err := b.Get(ctxFor(t), key)
	wantErr(t, "Get after Close", err, blobtier.ErrClosed, "")
}

// testDeadline: a server that never answers costs one timeout per call,
// whatever the caller's context allows.
func testDeadline(t *testing.T, caps Caps) {
	const timeout = 300 * time.Millisecond
	b := caps.Hung(t, timeout)
	defer b.Close()
	key := blobtier.SegmentKey(16, 1)
	calls := map[string]func(ctx context.Context) error{
		"PutIfAbsent": func(ctx context.Context) error { return b.PutIfAbsent(ctx, key, []byte("x"), 0) },
		"Get":         func(ctx context.Context) error { _, _, err := b.Get(ctx, key); return err },
		"Stat":        func(ctx context.Context) error { _, err := b.Stat(ctx, key); return err },
		"Delete":      func(ctx context.Context) error { return b.Delete(ctx, key) },
		"List": func(ctx context.Context) error {
			for _, err := range b.List(ctx, 16, blobtier.KindSegment) {
				return err
			}
			return errors.New("the listing ended without an error")
		},
	}
	if b.CanCAS() {
		calls["CompareAndSwap"] = func(ctx context.Context) error {
			return b.CompareAndSwap(ctx, blobtier.WatermarkKey(16), []byte(`{"v":1}`), "")
		}
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() { done <- call(context.Background()) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a hung server: %v, want a deadline error", name, err)
			}
		case <-time.After(hangGuard):
			t.Fatalf("%s on a hung server did not return: the per-call timeout is not applied", name)
		}
	}
}
