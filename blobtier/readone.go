package blobtier

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier/memcas"
)

// getOne reads and verifies key with one request: the GET's response
// carries the user metadata and the version token beside the bytes (S3:
// the x-amz-meta-* headers and the ETag; GCS XML reads: x-goog-meta-* and
// the generation; memcas: its ReaderInfo). Metadata, token and bytes come
// from one response, so they describe one object: no replacement between
// requests to detect, and the token is never newer than the bytes. ok is
// false, with no error, when the driver does not hand the response over (a
// GCS client on JSON reads): the caller then reads with a stat and a read.
func (t *bucket) getOne(ctx context.Context, op Op, key string, buf []byte, w Watcher) (data []byte, m Meta, v Version, ok bool, err error) {
	r, err := t.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, Meta{}, "", true, t.readErr(op, key, err)
	}
	defer r.Close()
	md, v, ok := t.responseMeta(r)
	if !ok {
		return nil, Meta{}, "", false, nil
	}
	m, err = DecodeMeta(md)
	if err != nil {
		return nil, Meta{}, v, true, &ObjectError{op, key, err}
	}
	if m.Length > MaxObjectBytes {
		return nil, Meta{}, v, true, &ObjectError{op, key, fmt.Errorf("%w: metadata length %d is over the %d-byte limit", ErrCorrupt, m.Length, MaxObjectBytes)}
	}
	data, sum, err := readBodyDigest(r, m.Length, buf, w)
	if err != nil {
		return nil, Meta{}, "", true, t.readErr(op, key, err)
	}
	if verr := verifySum(data, sum, m); verr != nil {
		return nil, Meta{}, v, true, &ObjectError{op, key, verr}
	}
	return data, m, v, true, nil
}

// responseMeta returns the user metadata and version token of an open
// reader's response, in the terms version and DecodeMeta use.
func (t *bucket) responseMeta(r *blob.Reader) (map[string]string, Version, bool) {
	switch t.cas {
	case casS3:
		var out s3.GetObjectOutput
		if r.As(&out) && out.ETag != nil && *out.ETag != "" {
			return lowerKeys(out.Metadata), Version(*out.ETag), true
		}
	case casGCS:
		var sr *storage.Reader
		if r.As(&sr) && sr != nil && sr.Attrs.Generation > 0 {
			// Metadata is nil on JSON reads (not carried), non-nil on XML.
			if md := sr.Metadata(); md != nil {
				return lowerKeys(md), Version(strconv.FormatInt(sr.Attrs.Generation, 10)), true
			}
		}
	case casMem:
		var info memcas.ReaderInfo
		if r.As(&info) && info.ETag != "" {
			return info.Metadata, Version(info.ETag), true
		}
	}
	return nil, "", false
}

// lowerKeys lower-cases metadata keys: the GCS client passes the headers'
// canonical spelling ("Length"), and our keys are lower-case (meta.go).
func lowerKeys(md map[string]string) map[string]string {
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[strings.ToLower(k)] = v
	}
	return out
}
