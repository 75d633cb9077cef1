// Package memcas is an in-memory gocloud blob driver with conditional
// writes, for tests and the simulation (internal/sim): memblob has no
// compare-and-swap, so the watermark and shared GC cannot run on it. Every
// write gets a new version token (ETag "g<N>", like a GCS generation, from
// one counter per bucket); a write made with IfNotExist, or whose
// BeforeWrite hook set a *Cond through its As, lands only if the condition
// holds, else it fails with gcerrors.FailedPrecondition. blobtier recognises
// the driver through As (*Bucket) and sets the Cond in its CAS hook. A
// reader's As(*ReaderInfo) gives the metadata and version token its
// response carried, as an S3 GET's headers do, so a verified read is one
// request here too.
//
// Beyond the driver, a Bucket lets a test reach the objects at rest: Raw,
// SetRaw (damage an object without changing its metadata or version
// semantics), Keys and Clone (an independent copy, for a clean view).
// Listings are one page in key order. A Bucket is safe for concurrent use.
package memcas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
)

// Cond is the condition a BeforeWrite hook may set: the write lands only if
// the object's current version token is IfMatch.
type Cond struct {
	IfMatch string
}

type object struct {
	data        []byte
	meta        map[string]string
	contentType string
	mod         time.Time
	etag        string
}

// Bucket is the driver.
type Bucket struct {
	mu   sync.Mutex
	objs map[string]*object
	gen  uint64
	now  func() time.Time
}

var _ driver.Bucket = (*Bucket)(nil)

// New returns an empty bucket whose modification times come from now (nil:
// a fixed clock, so runs are reproducible).
func New(now func() time.Time) *Bucket {
	if now == nil {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		now = func() time.Time { return t0 }
	}
	return &Bucket{objs: map[string]*object{}, now: now}
}

// OpenBucket is the portable bucket over a new driver.
func OpenBucket(now func() time.Time) *blob.Bucket { return blob.NewBucket(New(now)) }

type codedErr struct {
	code gcerrors.ErrorCode
	msg  string
}

func (e *codedErr) Error() string { return "memcas: " + e.msg }

func errf(code gcerrors.ErrorCode, format string, args ...any) error {
	return &codedErr{code, fmt.Sprintf(format, args...)}
}

func (b *Bucket) ErrorCode(err error) gcerrors.ErrorCode {
	var ce *codedErr
	if errors.As(err, &ce) {
		return ce.code
	}
	return gcerrors.Unknown
}

// As offers the driver itself (**Bucket), which is how blobtier detects it.
func (b *Bucket) As(i any) bool {
	p, ok := i.(**Bucket)
	if ok {
		*p = b
	}
	return ok
}

func (b *Bucket) ErrorAs(error, any) bool { return false }

func (b *Bucket) Attributes(_ context.Context, key string) (*driver.Attributes, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.objs[key]
	if o == nil {
		return nil, errf(gcerrors.NotFound, "%q not found", key)
	}
	return &driver.Attributes{
		ContentType: o.contentType,
		Metadata:    maps.Clone(o.meta),
		CreateTime:  o.mod,
		ModTime:     o.mod,
		Size:        int64(len(o.data)),
		ETag:        o.etag,
	}, nil
}

func (b *Bucket) ListPaged(_ context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if opts.Delimiter != "" {
		return nil, errf(gcerrors.Unimplemented, "delimiter listings are not supported")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	page := &driver.ListPage{}
	for _, k := range slices.Sorted(maps.Keys(b.objs)) {
		if !strings.HasPrefix(k, opts.Prefix) {
			continue
		}
		o := b.objs[k]
		page.Objects = append(page.Objects, &driver.ListObject{Key: k, ModTime: o.mod, Size: int64(len(o.data))})
	}
	return page, nil
}

// ReaderInfo is what a read's response carries beside the bytes, as an S3
// GET's headers do: the object's user metadata and version token. A reader
// fills it through As(*ReaderInfo).
type ReaderInfo struct {
	Metadata map[string]string
	ETag     string
}

type reader struct {
	*bytes.Reader
	attrs driver.ReaderAttributes
	info  ReaderInfo
}

func (r *reader) Close() error                         { return nil }
func (r *reader) Attributes() *driver.ReaderAttributes { return &r.attrs }
func (r *reader) As(i any) bool {
	p, ok := i.(*ReaderInfo)
	if ok {
		*p = ReaderInfo{Metadata: maps.Clone(r.info.Metadata), ETag: r.info.ETag}
	}
	return ok
}

func (b *Bucket) NewRangeReader(_ context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.objs[key]
	if o == nil {
		return nil, errf(gcerrors.NotFound, "%q not found", key)
	}
	data := o.data
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	data = data[offset:]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return &reader{Reader: bytes.NewReader(bytes.Clone(data)), attrs: driver.ReaderAttributes{ContentType: o.contentType, ModTime: o.mod, Size: int64(len(o.data))},
		info: ReaderInfo{Metadata: o.meta, ETag: o.etag}}, nil
}

type writer struct {
	b           *Bucket
	ctx         context.Context
	key         string
	contentType string
	meta        map[string]string
	ifNotExist  bool
	cond        *Cond
	buf         bytes.Buffer
}

func (w *writer) Write(p []byte) (int, error) { return w.buf.Write(p) }

func (w *writer) Close() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	return w.b.commit(w.key, w.buf.Bytes(), w.contentType, w.meta, w.ifNotExist, w.cond)
}

func (b *Bucket) commit(key string, data []byte, contentType string, meta map[string]string, ifNotExist bool, cond *Cond) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.objs[key]
	switch {
	case ifNotExist && cur != nil:
		return errf(gcerrors.FailedPrecondition, "%q exists", key)
	case cond != nil && cur == nil:
		return errf(gcerrors.NotFound, "%q not found (if-match %s)", key, cond.IfMatch)
	case cond != nil && cur.etag != cond.IfMatch:
		return errf(gcerrors.FailedPrecondition, "%q is at %s, not %s", key, cur.etag, cond.IfMatch)
	}
	b.gen++
	b.objs[key] = &object{data: bytes.Clone(data), meta: maps.Clone(meta), contentType: contentType, mod: b.now(), etag: fmt.Sprintf("g%d", b.gen)}
	return nil
}

func (b *Bucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	w := &writer{b: b, ctx: ctx, key: key, contentType: contentType}
	if opts != nil {
		w.meta = opts.Metadata
		w.ifNotExist = opts.IfNotExist
		if opts.BeforeWrite != nil {
			if err := opts.BeforeWrite(func(i any) bool {
				p, ok := i.(**Cond)
				if ok {
					if w.cond == nil {
						w.cond = &Cond{}
					}
					*p = w.cond
				}
				return ok
			}); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

func (b *Bucket) Copy(_ context.Context, dstKey, srcKey string, _ *driver.CopyOptions) error {
	b.mu.Lock()
	o := b.objs[srcKey]
	b.mu.Unlock()
	if o == nil {
		return errf(gcerrors.NotFound, "%q not found", srcKey)
	}
	return b.commit(dstKey, o.data, o.contentType, o.meta, false, nil)
}

func (b *Bucket) Delete(_ context.Context, key string, _ *driver.DeleteOptions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.objs[key] == nil {
		return errf(gcerrors.NotFound, "%q not found", key)
	}
	delete(b.objs, key)
	return nil
}

func (b *Bucket) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", errf(gcerrors.Unimplemented, "no signed URLs")
}

func (b *Bucket) Close() error { return nil }

// Keys lists the keys under prefix in order.
func (b *Bucket) Keys(prefix string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(b.objs)) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// Raw returns a copy of key's bytes at rest and whether it exists.
func (b *Bucket) Raw(key string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.objs[key]
	if o == nil {
		return nil, false
	}
	return bytes.Clone(o.data), true
}

// SetRaw replaces key's bytes at rest, keeping its metadata (damage at rest:
// the digest no longer matches). The version changes, as any write's does.
// It reports whether key exists.
func (b *Bucket) SetRaw(key string, data []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.objs[key]
	if o == nil {
		return false
	}
	b.gen++
	b.objs[key] = &object{data: bytes.Clone(data), meta: o.meta, contentType: o.contentType, mod: o.mod, etag: fmt.Sprintf("g%d", b.gen)}
	return true
}

// Clone returns an independent copy of the bucket (same objects, versions
// and counter).
func (b *Bucket) Clone() *Bucket {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := &Bucket{objs: make(map[string]*object, len(b.objs)), gen: b.gen, now: b.now}
	for k, o := range b.objs {
		oc := *o
		c.objs[k] = &oc
	}
	return c
}

// ReadAll is a helper for tests: the bytes of key through the driver.
func ReadAll(b *Bucket, key string) ([]byte, error) {
	r, err := b.NewRangeReader(context.Background(), key, 0, -1, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
