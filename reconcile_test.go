package bucketlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/tailbatch"
)

// Issue 12 finding 2: at start, a segment is durable only when its object
// reads back intact. A put that landed damaged bytes under our metadata,
// then a failed read-back, then a restart: the segment must be uploaded
// again (not counted durable, whose tail cleanup would delete the only
// good copies in the bucket), so a restore from the bucket alone has every
// event.
func TestDamagedSegmentFoundAtStartIsUploadedAgain(t *testing.T) {
	t.Run("tail_replication", func(t *testing.T) { damagedSegmentAtStart(t, false) })
	// Without tail objects, the cursor object's shipped_through never
	// passed the segment: it is read back at start too.
	t.Run("no_tail_replication", func(t *testing.T) { damagedSegmentAtStart(t, true) })
}

func damagedSegmentAtStart(t *testing.T, noTail bool) {
	ctx := ctxT(t)
	fb := faultbucket.New(memblob.OpenBucket(nil), 1)
	b := blobtier.New(fb.Bucket(), blobtier.Options{})
	defer b.Close()
	dir := t.TempDir()
	opts := Options{Dir: dir, Bucket: b, NoBackground: true, DisableTailReplication: noTail}
	l := mustOpen(t, opts)
	for i := 1; i <= 10; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := l.Ship(ctx, false); err != nil || (!noTail && rep.ShippedThrough != 10) {
		t.Fatalf("ship the tail: %+v %v", rep, err)
	}
	key := blobtier.SegmentKey(0, 1)
	corrupt := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpWrite, Kind: faultbucket.Corrupt, Key: key, Times: 1})
	refuse := fb.MustAdd(faultbucket.Rule{Op: faultbucket.OpRead, Kind: faultbucket.Refuse, Key: key})
	if _, err := l.Ship(ctx, true); err == nil {
		t.Fatal("the upload's read-back was refused, yet the ship succeeded")
	}
	l.Close() // its last shipment cannot read the object back either
	if fb.Fired(corrupt) != 1 {
		t.Fatalf("the damaging put fired %d times", fb.Fired(corrupt))
	}
	fb.Remove(refuse)
	if _, _, err := b.Get(ctx, key); !errors.Is(err, blobtier.ErrCorrupt) {
		t.Fatalf("setup: the segment object should be damaged: %v", err)
	}

	l = mustOpen(t, opts)
	if n := l.OpenReport().DurableSegments; n != 0 {
		t.Fatalf("a damaged object counted durable at start (%d durable segments)", n)
	}
	if _, err := l.Ship(ctx, false); err != nil {
		t.Fatalf("ship after the restart: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, key); err != nil {
		t.Fatalf("the segment was not uploaded again: %v", err)
	}
	rep, err := Restore(ctx, RestoreOptions{Bucket: b, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("restore from the bucket alone: %v", err)
	}
	if rep.LastSeq != 10 {
		t.Fatalf("restore: %+v", rep)
	}
}

// Issue 12 finding 5 (the owner's half): a damaged cursor object — bytes
// that fail verification, or a verified body that does not decode — does
// not keep the owner from starting: Open rebuilds it from the owner's
// shipped position and consumers, and says so in the log.
func TestDamagedCursorObjectIsRebuiltAtStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(data []byte) (body []byte, meta blobtier.Meta)
	}{
		{"fails_verification", func(data []byte) ([]byte, blobtier.Meta) {
			return []byte(`{"v":1,"shipped_through":0,"consumers":{}}`), blobtier.MetaOf(data, 0)
		}},
		{"does_not_decode", func([]byte) ([]byte, blobtier.Meta) {
			body := []byte(`{"v":"x"`)
			return body, blobtier.MetaOf(body, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			raw := memblob.OpenBucket(nil)
			b := blobtier.New(raw, blobtier.Options{})
			defer b.Close()
			dir := t.TempDir()
			var logs syncBuffer
			opts := Options{Dir: dir, Bucket: b, NoBackground: true, StartupTimeout: 2 * time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			l := mustOpen(t, opts)
			for i := 1; i <= 5; i++ {
				if _, err := l.Append(ctx, ev("1", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Pull(ctx, "c", 10); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Ack(ctx, "c", 3); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			closeOK(t, l)
			key := blobtier.CursorKey(0)
			good, err := raw.ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			body, meta := tc.damage(good)
			w, err := raw.NewWriter(ctx, key, &blob.WriterOptions{Metadata: meta.Encode()})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(body)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := tailbatch.ReadCursor(ctx, b, 0); err == nil {
				t.Fatal("setup: the cursor object reads fine")
			}

			start := time.Now()
			l, err = Open(ctx, opts)
			if err != nil {
				t.Fatalf("Open over a damaged cursor object: %v (after %s)", err, time.Since(start))
			}
			defer l.Close()
			c, _, err := tailbatch.ReadCursor(ctx, b, 0)
			if err != nil {
				t.Fatalf("the cursor object was not rebuilt: %v", err)
			}
			if c.ShippedThrough != 5 || c.Consumers["c"] != 3 || len(c.Consumers) != 1 {
				t.Fatalf("rebuilt cursor object %+v", c)
			}
			if !strings.Contains(logs.String(), "the cursor object was damaged") {
				t.Fatalf("the rebuild was not logged:\n%s", logs.String())
			}
			if ready, why := l.Health(); !ready {
				t.Fatalf("not ready: %s", why)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func closeOK(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// Issue 12 finding 14 (Open's part): Open with a bucket stays O(1) in the
// log's length. Its tail comparison reads the frames it needs and never
// builds the store's read index.
func TestOpenWithBucketDoesNotBuildTheReadIndex(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	dir := t.TempDir()
	opts := Options{Dir: dir, Bucket: b, NoBackground: true, SegmentMaxBytes: 4096}
	l := mustOpen(t, opts)
	for i := 1; i <= 200; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			if _, err := l.Ship(ctx, true); err != nil { // sealed segments, then tail objects above them
				t.Fatal(err)
			}
		}
	}
	if rep, err := l.Ship(ctx, false); err != nil || rep.ShippedThrough != 200 || rep.TailBatches == 0 {
		t.Fatalf("ship: %+v %v", rep, err)
	}
	closeOK(t, l)

	l = mustOpen(t, opts)
	defer l.Close()
	if or := l.OpenReport(); or.Store.Replayed || or.ShippedThrough != 200 || or.DurableSegments == 0 {
		t.Fatalf("setup: %+v", or)
	}
	if n := l.store.IndexBytes(); n != 0 {
		t.Fatalf("Open with a bucket built the read index (%d bytes)", n)
	}
}

// The tail comparison still refuses a tail object whose events differ from
// the local ones, also when it is the only evidence.
func TestOpenRefusesADivergedTailWithoutTheIndex(t *testing.T) {
	ctx := ctxT(t)
	b := memBucket(t)
	a := mustOpen(t, Options{Dir: t.TempDir(), Bucket: b, NoBackground: true})
	for i := 1; i <= 5; i++ {
		a.Append(ctx, ev("1", i))
	}
	if _, err := a.Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	closeOK(t, a)
	dir := t.TempDir()
	o := mustOpen(t, Options{Dir: dir})
	for i := 1; i <= 7; i++ {
		e := ev("1", i)
		if i == 4 {
			e.Payload += " (another history)"
		}
		o.Append(ctx, e)
	}
	closeOK(t, o)
	_, err := Open(ctx, Options{Dir: dir, Bucket: b, NoBackground: true})
	if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "sequence 4") {
		t.Fatalf("Open over a diverged tail: %v", err)
	}
}

// segmentGets counts the reads of segment objects.
type segmentGets struct {
	blobtier.Bucket
	mu sync.Mutex
	n  int
}

func (g *segmentGets) Get(ctx context.Context, key string) ([]byte, blobtier.Meta, error) {
	if k, err := blobtier.ParseKey(key); err == nil && k.Kind == blobtier.KindSegment {
		g.mu.Lock()
		g.n++
		g.mu.Unlock()
	}
	return g.Bucket.Get(ctx, key)
}

func (g *segmentGets) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// Reading every segment back at each start would make Open cost the
// retained history: a segment the cursor object's shipped_through passed,
// with no tail object left over it, was read back intact by the uploader
// before, and Open does not download it again.
func TestOpenDoesNotReadBackVerifiedSegments(t *testing.T) {
	ctx := ctxT(t)
	g := &segmentGets{Bucket: memBucket(t)}
	dir := t.TempDir()
	opts := Options{Dir: dir, Bucket: g, NoBackground: true, SegmentMaxBytes: 4096}
	l := mustOpen(t, opts)
	for i := 1; i <= 200; i++ {
		if _, err := l.Append(ctx, ev("1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ship(ctx, false); err != nil { // the cursor object and cleanup
		t.Fatal(err)
	}
	closeOK(t, l)
	before := g.count()
	l = mustOpen(t, opts)
	defer l.Close()
	if n := l.OpenReport().DurableSegments; n < 5 {
		t.Fatalf("setup: %d durable segments", n)
	}
	if n := g.count() - before; n != 0 {
		t.Fatalf("Open read %d verified segments back", n)
	}
}
