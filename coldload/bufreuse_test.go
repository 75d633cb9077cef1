package coldload_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/localseg"
)

// The segment phase reads each object into a buffer it reuses for later
// objects (blobtier.GetBuffered). What that must never do: let a buffer go
// to the next object while its segment is still being verified or written,
// or let stale bytes of an earlier object stand in for a damaged one.

// bufReader reads a blobtier bucket through GetBuffered and records what
// each read was handed. before, when set, runs first and may fail the read;
// after runs once the read returned.
type bufReader struct {
	blobtier.Bucket
	mu      sync.Mutex
	reads   map[string]int  // segment reads by key
	bufs    map[*byte]bool  // the buffers segment reads were handed
	aliased int             // segment reads whose bytes landed in the buffer handed
	second  map[string]bool // segment reads handed a buffer an earlier read had used
	before  func(key string) error
	after   func(key string)
	segment func(key string) bool
}

func newBufReader(b blobtier.Bucket) *bufReader {
	return &bufReader{Bucket: b, reads: map[string]int{}, bufs: map[*byte]bool{}, second: map[string]bool{}, segment: func(key string) bool {
		k, err := blobtier.ParseKey(key)
		return err == nil && k.Kind == blobtier.KindSegment
	}}
}

func (r *bufReader) GetBuffered(ctx context.Context, key string, buf []byte) ([]byte, blobtier.Meta, error) {
	if r.segment(key) && cap(buf) > 0 {
		r.mu.Lock()
		r.second[key] = r.bufs[&buf[:1][0]]
		r.mu.Unlock()
	}
	if r.before != nil {
		if err := r.before(key); err != nil {
			return nil, blobtier.Meta{}, err
		}
	}
	data, m, err := blobtier.GetBuffered(ctx, r.Bucket, key, buf)
	if r.segment(key) {
		r.mu.Lock()
		r.reads[key]++
		if cap(buf) > 0 {
			r.bufs[&buf[:1][0]] = true
			if err == nil && len(data) > 0 && &data[0] == &buf[:1][0] {
				r.aliased++
			}
		}
		r.mu.Unlock()
	}
	if r.after != nil {
		r.after(key)
	}
	return data, m, err
}

// manySegments fills a bucket with n sealed segment objects of shard 0.
func manySegments(t *testing.T, n int) (*owner, blobtier.Bucket, *blob.Bucket) {
	t.Helper()
	b, raw := memBucket(t)
	o := newOwner(t, b, 0, 1024)
	for len(o.sealed()) < n {
		o.append(4)
	}
	o.seal()
	o.publish()
	return o, b, raw
}

func readAtRest(t *testing.T, raw *blob.Bucket, key string) []byte {
	t.Helper()
	data, err := raw.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRestoreReusesReadBuffers: the segment reads of a restore share at
// most Concurrency buffers, each read lands in the buffer it was handed,
// and the restore is still exact.
func TestRestoreReusesReadBuffers(t *testing.T) {
	o, b, _ := manySegments(t, 12)
	r := newBufReader(b)
	dir, rep := mustHydrate(t, r, 0, coldload.Options{Concurrency: 2})
	segs := len(o.sealed())
	if rep.Segments != segs || len(r.reads) != segs {
		t.Fatalf("restored %d segments, read %d through GetBuffered; the bucket holds %d", rep.Segments, len(r.reads), segs)
	}
	if len(r.bufs) == 0 || len(r.bufs) > 2 || r.aliased != segs {
		t.Fatalf("%d segment reads used %d buffers (want 1 or 2, at Concurrency 2), %d of them landed in the buffer handed", segs, len(r.bufs), r.aliased)
	}
	st := openRO(t, dir)
	sameRecords(t, allRecords(t, st), o.records())
}

// blockingFS holds the first write of segment 1's file until release is
// closed (entered is closed when it starts), and keeps a copy of the bytes
// that write was given.
type blockingFS struct {
	localseg.FS
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	got     []byte
	fired   bool
}

func (f *blockingFS) OpenFile(name string, flag int, perm os.FileMode) (localseg.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasPrefix(filepath.Base(name), localseg.SegmentFileName(1)) || flag&os.O_CREATE == 0 {
		return file, err
	}
	return &blockingFile{File: file, fs: f}, nil
}

type blockingFile struct {
	localseg.File
	fs *blockingFS
}

func (f *blockingFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	first := !f.fs.fired
	f.fs.fired = true
	f.fs.mu.Unlock()
	if first {
		close(f.fs.entered)
		select {
		case <-f.fs.release:
		case <-time.After(time.Minute): // a deadlock guard, never the condition tested
			return 0, errors.New("test: segment 3 was never read while segment 1 was being written")
		}
		f.fs.mu.Lock()
		f.fs.got = bytes.Clone(p)
		f.fs.mu.Unlock()
	}
	return f.File.WriteAt(p, off)
}

// TestReadBufferStaysWithItsSegmentUntilWritten: with two reads in flight,
// segment 1 is read once segment 2's read has taken its buffer, and its
// write is held until segment 3 has been read; segment 2's read fails (a
// bucket error in the middle of the pipeline: it gives no buffer back)
// once segment 1's write has begun, which lets segment 3's read start and
// take a buffer from the pool. Had segment 1's buffer gone
// back to the pool before its write, segment 3 would have been read into
// it and segment 1's file would hold segment 3's bytes. The restore fails
// on segment 2, naming it, and leaves nothing behind.
func TestReadBufferStaysWithItsSegmentUntilWritten(t *testing.T) {
	b, _ := memBucket(t)
	// Segment 1 is the largest, so segment 3 fits in its buffer.
	bounds := [][2]uint64{{1, 40}, {41, 50}, {51, 60}, {61, 70}}
	for i, r := range bounds {
		put(t, b, blobtier.SegmentKey(0, uint64(i+1)), frames(t, evFrames(r[0], r[1], plain)...))
	}
	want := frames(t, evFrames(1, 40, plain)...)
	injected := errors.New("injected: the bucket failed this read")
	fsys := &blockingFS{FS: localseg.OSFS{}, entered: make(chan struct{}), release: make(chan struct{})}
	r := newBufReader(b)
	var once sync.Once
	second := make(chan struct{}) // segment 2's read holds its buffer
	wait := func(c chan struct{}) {
		select {
		case <-c:
		case <-time.After(time.Minute): // a deadlock guard, never the condition tested
		}
	}
	r.before = func(key string) error {
		switch key {
		case blobtier.SegmentKey(0, 1):
			wait(second)
		case blobtier.SegmentKey(0, 2):
			close(second)
			wait(fsys.entered)
			return injected
		}
		return nil
	}
	r.after = func(key string) {
		if key == blobtier.SegmentKey(0, 3) {
			once.Do(func() { close(fsys.release) })
		}
	}
	dir := target(t, 0)
	_, err := coldload.Hydrate(ctxT(t), r, 0, dir, coldload.Options{Concurrency: 2, Store: localseg.Options{FS: fsys}})
	mustErrIs(t, err, injected)
	mustContain(t, err, blobtier.SegmentKey(0, 2))
	absentOrEmpty(t, dir)
	noLeftovers(t, dir)
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if !fsys.fired {
		t.Fatal("segment 1 was never written")
	}
	if !bytes.Equal(fsys.got, want) {
		t.Fatalf("segment 1's file was written with %d bytes that are not its object's %d (a reused buffer)", len(fsys.got), len(want))
	}
}

// TestDamagedSegmentMidPipelineRefuses: a segment in the middle of a
// restore whose reads reuse buffers, damaged at rest (metadata intact: the
// digest fails) or damaged inside a frame under honest metadata (the
// digest passes, the frame's CRC fails), is refused naming its key, and
// nothing is left behind. The buffer it is read into held an intact
// segment a moment before.
func TestDamagedSegmentMidPipelineRefuses(t *testing.T) {
	for _, honestMeta := range []bool{false, true} {
		t.Run(map[bool]string{false: "digest", true: "frame CRC"}[honestMeta], func(t *testing.T) {
			_, b, raw := manySegments(t, 12)
			key := blobtier.SegmentKey(0, 7)
			data := readAtRest(t, raw, key)
			bad := bytes.Clone(data)
			bad[len(bad)/2] ^= 0x20
			meta := blobtier.MetaOf(data, 0)
			if honestMeta {
				meta = blobtier.MetaOf(bad, 0)
			}
			putRaw(t, raw, key, bad, meta.Encode())
			r := newBufReader(b)
			dir := target(t, 0)
			_, err := coldload.Hydrate(ctxT(t), r, 0, dir, coldload.Options{Concurrency: 3})
			mustErrIs(t, err, coldload.ErrCorrupt)
			var oe *coldload.ObjectError
			if !errors.As(err, &oe) || oe.Key != key {
				t.Fatalf("error %v does not name %s", err, key)
			}
			if !r.second[key] {
				t.Fatalf("%s was not read into a buffer an earlier read had used: the test did not exercise reuse", key)
			}
			absentOrEmpty(t, dir)
			noLeftovers(t, dir)
		})
	}
}

// TestCancelMidPipeline: the caller's context canceled while segments are
// in flight ends the restore with the context's error and nothing left.
func TestCancelMidPipeline(t *testing.T) {
	_, b, _ := manySegments(t, 12)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	r := newBufReader(b)
	r.before = func(key string) error {
		if key == blobtier.SegmentKey(0, 6) {
			cancel()
		}
		return nil
	}
	dir := target(t, 0)
	_, err := coldload.Hydrate(ctx, r, 0, dir, coldload.Options{Concurrency: 3})
	mustErrIs(t, err, context.Canceled)
	absentOrEmpty(t, dir)
	noLeftovers(t, dir)
}
