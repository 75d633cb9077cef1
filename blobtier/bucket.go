package blobtier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier/memcas"
)

// casMode is how a bucket does compare-and-swap, found at New time from the
// provider client behind the *blob.Bucket.
type casMode int

const (
	casNone casMode = iota // memblob, fileblob, anything unknown
	casS3                  // If-Match on the ETag
	casGCS                 // ifGenerationMatch on the generation
	casMem                 // memcas's Cond on the ETag (tests, the simulation)
)

func (m casMode) String() string {
	switch m {
	case casS3:
		return "s3"
	case casGCS:
		return "gcs"
	case casMem:
		return "memcas"
	}
	return "none"
}

// maxAttempts bounds the internal re-reads and re-stats of one call (an
// object replaced between two requests of one call).
const maxAttempts = 3

// contentType is set on every write so gocloud does not sniff the bytes.
const contentType = "application/octet-stream"

type bucket struct {
	b       *blob.Bucket
	timeout time.Duration
	cas     casMode
	// release is called by Close instead of closing b when the
	// *blob.Bucket is shared (named mem:// buckets).
	release func() error
	closed  atomic.Bool
}

var _ Bucket = (*bucket)(nil)

// New wraps an opened *blob.Bucket. The Bucket takes ownership: its Close
// closes b. Compare-and-swap is enabled when b is backed by an S3 or GCS
// client, or by the test driver memcas (found through b.As), so a driver
// that wraps one of them and forwards As (faultbucket does) keeps it. A nil b gives a Bucket whose
// every call fails.
func New(b *blob.Bucket, opts Options) Bucket {
	return newBucket(b, opts, nil)
}

func newBucket(b *blob.Bucket, opts Options, release func() error) *bucket {
	t := &bucket{b: b, timeout: opts.Timeout, release: release}
	if t.timeout <= 0 {
		t.timeout = DefaultTimeout
	}
	if b == nil {
		return t
	}
	var s3c *s3.Client
	var gcs *storage.Client
	var mc *memcas.Bucket
	switch {
	case b.As(&s3c):
		t.cas = casS3
	case b.As(&gcs):
		t.cas = casGCS
	case b.As(&mc):
		t.cas = casMem
	}
	return t
}

var errNilBucket = errors.New("blobtier: nil *blob.Bucket")

func (t *bucket) CanCAS() bool { return t.cas != casNone }

// usable refuses a call on a nil or closed bucket, or with a context that
// has already ended, before any request.
func (t *bucket) usable(ctx context.Context, op Op, key string) error {
	switch {
	case t.b == nil:
		return &ObjectError{op, key, errNilBucket}
	case t.closed.Load():
		return &ObjectError{op, key, ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return &ObjectError{op, key, err}
	}
	return nil
}

// begin checks the bucket is usable and gives the call its deadline.
func (t *bucket) begin(ctx context.Context, op Op, key string) (context.Context, context.CancelFunc, error) {
	if err := t.usable(ctx, op, key); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	return ctx, cancel, nil
}

// checkWrite refuses what no write may carry, before any request.
func checkWrite(op Op, key string, data []byte) error {
	if len(data) > MaxObjectBytes {
		return &ObjectError{op, key, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxObjectBytes)}
	}
	if _, err := ParseKey(key); err != nil {
		return &ObjectError{op, key, err}
	}
	return nil
}

func writerOptions(m Meta) *blob.WriterOptions {
	return &blob.WriterOptions{ContentType: contentType, Metadata: m.Encode()}
}

func (t *bucket) PutIfAbsent(ctx context.Context, key string, data []byte, epoch uint64) error {
	if err := checkWrite(OpPut, key, data); err != nil {
		return err
	}
	ctx, cancel, err := t.begin(ctx, OpPut, key)
	if err != nil {
		return err
	}
	defer cancel()
	want := MetaOf(data, epoch)
	opts := writerOptions(want)
	opts.IfNotExist = true
	for attempt := 1; ; attempt++ {
		werr := t.b.WriteAll(ctx, key, data, opts)
		if werr == nil {
			return nil
		}
		if classify(werr) != classPrecondition {
			return &ObjectError{OpPut, key, werr}
		}
		// The key is taken. Identical bytes and epoch are our own earlier
		// put whose answer was lost, or the same segment shipped twice.
		attrs, err := t.b.Attributes(ctx, key)
		if err != nil {
			// Gone again (deleted, or a 409 while another write was still
			// in flight): try the create once more.
			if classify(err) == classNotFound && attempt < maxAttempts {
				if err := Wait(ctx, time.Duration(attempt)*20*time.Millisecond); err != nil {
					return &ObjectError{OpPut, key, err}
				}
				continue
			}
			return &ObjectError{OpPut, key, fmt.Errorf("create refused (%w), then stat: %w", werr, err)}
		}
		got, merr := DecodeMeta(attrs.Metadata)
		switch {
		case merr != nil:
			return &ObjectError{OpPut, key, fmt.Errorf("%w: existing object has unreadable metadata: %w", ErrConflict, merr)}
		case got != want:
			return &ObjectError{OpPut, key, fmt.Errorf("%w: existing object has length %d xxh64 %016x epoch %016x; ours has length %d xxh64 %016x epoch %016x",
				ErrConflict, got.Length, got.XXH64, got.Epoch, want.Length, want.XXH64, want.Epoch)}
		case attrs.Size != want.Length:
			// Our own earlier put (its metadata names our bytes) that
			// landed damaged: no second writer. The caller deletes it and
			// puts again.
			return &ObjectError{OpPut, key, fmt.Errorf("%w: existing object's metadata matches ours but it holds %d bytes, not %d",
				ErrCorrupt, attrs.Size, want.Length)}
		}
		return nil
	}
}

func (t *bucket) Put(ctx context.Context, key string, data []byte) error {
	if err := checkWrite(OpPut, key, data); err != nil {
		return err
	}
	ctx, cancel, err := t.begin(ctx, OpPut, key)
	if err != nil {
		return err
	}
	defer cancel()
	if err := t.b.WriteAll(ctx, key, data, writerOptions(MetaOf(data, 0))); err != nil {
		return &ObjectError{OpPut, key, err}
	}
	return nil
}

func (t *bucket) CompareAndSwap(ctx context.Context, key string, data []byte, expect Version) error {
	if t.b != nil && t.cas == casNone {
		return &ObjectError{OpCAS, key, ErrUnsupported}
	}
	if err := checkWrite(OpCAS, key, data); err != nil {
		return err
	}
	ctx, cancel, err := t.begin(ctx, OpCAS, key)
	if err != nil {
		return err
	}
	defer cancel()
	opts := writerOptions(MetaOf(data, 0))
	if expect == "" {
		opts.IfNotExist = true
	} else {
		hook, err := t.casHook(expect)
		if err != nil {
			return &ObjectError{OpCAS, key, err}
		}
		opts.BeforeWrite = hook
	}
	werr := t.b.WriteAll(ctx, key, data, opts)
	switch classify(werr) {
	case classPrecondition, classNotFound:
		// A 404 on If-Match: the object was deleted since it was read.
		return &ObjectError{OpCAS, key, fmt.Errorf("%w: %w", ErrPrecondition, werr)}
	}
	if werr != nil {
		return &ObjectError{OpCAS, key, werr}
	}
	return nil
}

var errNoHook = errors.New("blobtier: the driver did not offer its request to BeforeWrite")

// casHook returns the BeforeWrite hook that makes a write conditional on
// expect, in the provider's own terms.
func (t *bucket) casHook(expect Version) (func(func(any) bool) error, error) {
	switch t.cas {
	case casS3:
		etag := string(expect)
		return func(as func(any) bool) error {
			var in *transfermanager.UploadObjectInput
			if !as(&in) {
				return errNoHook
			}
			in.IfMatch = &etag
			return nil
		}, nil
	case casGCS:
		gen, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || gen <= 0 {
			return nil, fmt.Errorf("blobtier: %q is not a GCS generation", expect)
		}
		return func(as func(any) bool) error {
			var h **storage.ObjectHandle
			if !as(&h) {
				return errNoHook
			}
			*h = (*h).If(storage.Conditions{GenerationMatch: gen})
			return nil
		}, nil
	case casMem:
		etag := string(expect)
		return func(as func(any) bool) error {
			var c *memcas.Cond
			if !as(&c) {
				return errNoHook
			}
			c.IfMatch = etag
			return nil
		}, nil
	}
	return nil, ErrUnsupported
}

func (t *bucket) Get(ctx context.Context, key string) ([]byte, Meta, error) {
	data, m, _, err := t.get(ctx, OpGet, key)
	return data, m, err
}

func (t *bucket) GetVersioned(ctx context.Context, key string) ([]byte, Version, error) {
	data, _, v, err := t.get(ctx, OpGet, key)
	if err != nil {
		if v != "" && errors.Is(err, ErrCorrupt) {
			// The object is there but damaged: its version lets the owner
			// replace it by compare-and-swap.
			return nil, v, err
		}
		return nil, "", err
	}
	return data, v, nil
}

// get reads key and verifies it against its metadata, with one GET where
// the response carries the metadata and the version token (getOne), else
// with a stat and then a read (getTwo). Either way the version token
// returned is never newer than the bytes (a CAS on it can only fail, never
// overwrite a write we did not see). On ErrCorrupt the version of the
// damaged object is returned when known.
func (t *bucket) get(ctx context.Context, op Op, key string) ([]byte, Meta, Version, error) {
	ctx, cancel, err := t.begin(ctx, op, key)
	if err != nil {
		return nil, Meta{}, "", err
	}
	defer cancel()
	if t.cas != casNone {
		if data, m, v, ok, err := t.getOne(ctx, op, key, nil, nil); ok {
			return data, m, v, err
		}
	}
	return t.getTwo(ctx, op, key, nil, nil)
}

// getTwo reads the attributes first and the bytes after. If the bytes fail
// verification and the attributes changed meanwhile, the object was
// replaced between the two requests and is read again.
func (t *bucket) getTwo(ctx context.Context, op Op, key string, buf []byte, w Watcher) ([]byte, Meta, Version, error) {
	for attempt := 1; ; attempt++ {
		attrs, err := t.b.Attributes(ctx, key)
		if err != nil {
			return nil, Meta{}, "", t.readErr(op, key, err)
		}
		m, err := DecodeMeta(attrs.Metadata)
		if err != nil {
			return nil, Meta{}, t.version(attrs), &ObjectError{op, key, err}
		}
		if m.Length > MaxObjectBytes {
			return nil, Meta{}, t.version(attrs), &ObjectError{op, key, fmt.Errorf("%w: metadata length %d is over the %d-byte limit", ErrCorrupt, m.Length, MaxObjectBytes)}
		}
		data, sum, err := t.readAll(ctx, key, m.Length, buf, w)
		if err != nil {
			return nil, Meta{}, "", t.readErr(op, key, err)
		}
		verr := verifySum(data, sum, m)
		if verr == nil {
			return data, m, t.version(attrs), nil
		}
		if attempt < maxAttempts {
			if again, err := t.b.Attributes(ctx, key); err == nil && changed(attrs, again) {
				continue
			}
		}
		return nil, Meta{}, t.version(attrs), &ObjectError{op, key, verr}
	}
}

// readAll reads at most length+1 bytes of key (into buf when it can hold
// them) and their digest, showing them to w (when not nil) as they arrive.
func (t *bucket) readAll(ctx context.Context, key string, length int64, buf []byte, w Watcher) ([]byte, uint64, error) {
	r, err := t.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	return readBodyDigest(r, length, buf, w)
}

func (t *bucket) readErr(op Op, key string, err error) error {
	if classify(err) == classNotFound {
		return &ObjectError{op, key, fmt.Errorf("%w: %w", ErrNotFound, err)}
	}
	return &ObjectError{op, key, err}
}

// changed reports whether two stats of one key saw different objects.
func changed(a, b *blob.Attributes) bool {
	return a.ETag != b.ETag || a.Size != b.Size || !a.ModTime.Equal(b.ModTime) || !maps.Equal(a.Metadata, b.Metadata)
}

// version is the token CompareAndSwap expects for the object attrs
// describes.
func (t *bucket) version(attrs *blob.Attributes) Version {
	if t.cas == casGCS {
		var oa storage.ObjectAttrs
		if attrs.As(&oa) {
			return Version(strconv.FormatInt(oa.Generation, 10))
		}
	}
	if attrs.ETag != "" {
		return Version(attrs.ETag)
	}
	// Buckets without an ETag cannot compare-and-swap; the token only has
	// to be non-empty (present) and change with the object.
	return Version(fmt.Sprintf("mtime-%d-%d", attrs.ModTime.UnixNano(), attrs.Size))
}

func (t *bucket) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	ctx, cancel, err := t.begin(ctx, OpStat, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	defer cancel()
	attrs, err := t.b.Attributes(ctx, key)
	if err != nil {
		return ObjectInfo{}, t.readErr(OpStat, key, err)
	}
	info := objectInfo(key, attrs.Size)
	m, err := DecodeMeta(attrs.Metadata)
	if err != nil {
		// The object exists but cannot be verified: say so, with what
		// is known.
		return info, &ObjectError{OpStat, key, err}
	}
	info.Meta = m
	return info, nil
}

func objectInfo(key string, size int64) ObjectInfo {
	info := ObjectInfo{Key: key, Size: size}
	info.Parsed, info.ParseErr = ParseKey(key)
	return info
}

func (t *bucket) Delete(ctx context.Context, key string) error {
	ctx, cancel, err := t.begin(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	defer cancel()
	if err := t.b.Delete(ctx, key); err != nil && classify(err) != classNotFound {
		return &ObjectError{OpDelete, key, err}
	}
	return nil
}

// List walks one flat listing by prefix. A delimiter listing is never used:
// both in-process emulators get it wrong (EMULATORS.md). Each page request
// gets its own deadline.
func (t *bucket) List(ctx context.Context, shard uint32, kind Kind) iter.Seq2[ObjectInfo, error] {
	prefix := ListPrefix(shard, kind)
	return func(yield func(ObjectInfo, error) bool) {
		if !kind.valid() {
			yield(ObjectInfo{}, &ObjectError{OpList, prefix, fmt.Errorf("blobtier: unknown kind %d", kind)})
			return
		}
		if err := t.usable(ctx, OpList, prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		it := t.b.List(&blob.ListOptions{Prefix: prefix})
		for {
			pctx, cancel := context.WithTimeout(ctx, t.timeout)
			obj, err := it.Next(pctx)
			cancel()
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(ObjectInfo{}, &ObjectError{OpList, prefix, err})
				return
			}
			if obj.IsDir {
				continue
			}
			if !yield(objectInfo(obj.Key, obj.Size), nil) {
				return
			}
		}
	}
}

func (t *bucket) Close() error {
	if t.b == nil {
		return errNilBucket
	}
	if t.closed.Swap(true) {
		return ErrClosed
	}
	if t.release != nil {
		return t.release()
	}
	return t.b.Close()
}
