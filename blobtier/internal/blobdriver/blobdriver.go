// Package blobdriver presents an opened *blob.Bucket as a gocloud
// driver.Bucket, so a driver can be layered over any bucket gocloud opens.
//
// gocloud keeps the driver of a *blob.Bucket private and the provider
// packages (memblob, s3blob, gcsblob, fileblob) export only constructors that
// return *blob.Bucket, so wrapping "the driver" of an S3 or GCS bucket is only
// possible through the portable type. This adapter forwards every call to
// the portable type and every As/ErrorAs to it, so provider escape hatches
// (b.As(&s3Client), BeforeWrite's transfermanager.UploadObjectInput, a GCS
// **storage.ObjectHandle, Attributes.As) keep working through the layers.
//
// Errors come back from the portable type already carrying a gcerrors code;
// ErrorCode reads it back. The adapter is safe for concurrent use when the
// wrapped bucket is (every gocloud bucket is).
package blobdriver

import (
	"context"
	"io"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
)

// Driver is a driver.Bucket over a *blob.Bucket.
type Driver struct {
	b      *blob.Bucket
	shared bool
}

var _ driver.Bucket = (*Driver)(nil)

// New returns a driver over b. Closing the driver closes b unless shared is
// true (b then outlives every driver made over it).
func New(b *blob.Bucket, shared bool) *Driver { return &Driver{b: b, shared: shared} }

// ErrorCode returns the code the portable type attached to err.
func (d *Driver) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }

func (d *Driver) As(i any) bool { return d.b.As(i) }

func (d *Driver) ErrorAs(err error, i any) bool { return d.b.ErrorAs(err, i) }

func (d *Driver) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := d.b.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		ContentType:        a.ContentType,
		Metadata:           a.Metadata,
		CreateTime:         a.CreateTime,
		ModTime:            a.ModTime,
		Size:               a.Size,
		MD5:                a.MD5,
		ETag:               a.ETag,
		AsFunc:             a.As,
	}, nil
}

// defaultPageSize is used when the caller leaves PageSize zero (the
// portable ListPage insists on a positive one).
const defaultPageSize = 1000

func (d *Driver) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	token := opts.PageToken
	if len(token) == 0 {
		token = blob.FirstPageToken
	}
	size := opts.PageSize
	if size <= 0 {
		size = defaultPageSize
	}
	objs, next, err := d.b.ListPage(ctx, token, size, &blob.ListOptions{
		Prefix:     opts.Prefix,
		Delimiter:  opts.Delimiter,
		BeforeList: opts.BeforeList,
	})
	if err == io.EOF {
		return &driver.ListPage{}, nil
	}
	if err != nil {
		return nil, err
	}
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objs {
		page.Objects = append(page.Objects, &driver.ListObject{
			Key:     o.Key,
			ModTime: o.ModTime,
			Size:    o.Size,
			MD5:     o.MD5,
			IsDir:   o.IsDir,
			AsFunc:  o.As,
		})
	}
	return page, nil
}

func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	var ro *blob.ReaderOptions
	if opts != nil {
		ro = &blob.ReaderOptions{BeforeRead: opts.BeforeRead}
	}
	r, err := d.b.NewRangeReader(ctx, key, offset, length, ro)
	if err != nil {
		return nil, err
	}
	return &reader{r: r}, nil
}

type reader struct{ r *blob.Reader }

func (r *reader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *reader) Close() error               { return r.r.Close() }
func (r *reader) As(i any) bool              { return r.r.As(i) }
func (r *reader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (d *Driver) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return d.b.NewWriter(ctx, key, WriterOptions(contentType, opts))
}

// WriterOptions converts driver writer options back to portable ones.
// DisableContentTypeDetection is set when contentType is empty, so the
// portable writer does not sniff a second time.
func WriterOptions(contentType string, opts *driver.WriterOptions) *blob.WriterOptions {
	wo := &blob.WriterOptions{ContentType: contentType, DisableContentTypeDetection: contentType == ""}
	if opts != nil {
		wo.BufferSize = opts.BufferSize
		wo.MaxConcurrency = opts.MaxConcurrency
		wo.CacheControl = opts.CacheControl
		wo.ContentDisposition = opts.ContentDisposition
		wo.ContentEncoding = opts.ContentEncoding
		wo.ContentLanguage = opts.ContentLanguage
		wo.ContentMD5 = opts.ContentMD5
		wo.Metadata = opts.Metadata
		wo.BeforeWrite = opts.BeforeWrite
		wo.IfNotExist = opts.IfNotExist
		if opts.DisableContentTypeDetection {
			wo.DisableContentTypeDetection = true
		}
	}
	return wo
}

func (d *Driver) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	var co *blob.CopyOptions
	if opts != nil {
		co = &blob.CopyOptions{BeforeCopy: opts.BeforeCopy}
	}
	return d.b.Copy(ctx, dstKey, srcKey, co)
}

func (d *Driver) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	var do *blob.DeleteOptions
	if opts != nil {
		do = &blob.DeleteOptions{BeforeDelete: opts.BeforeDelete}
	}
	return d.b.DeleteWithOptions(ctx, key, do)
}

func (d *Driver) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	so := &blob.SignedURLOptions{}
	if opts != nil {
		so = &blob.SignedURLOptions{
			Expiry:                   opts.Expiry,
			Method:                   opts.Method,
			ContentType:              opts.ContentType,
			EnforceAbsentContentType: opts.EnforceAbsentContentType,
			BeforeSign:               opts.BeforeSign,
		}
	}
	return d.b.SignedURL(ctx, key, so)
}

func (d *Driver) Close() error {
	if d.shared {
		return nil
	}
	return d.b.Close()
}
