package buckets

import (
	"context"
	"fmt"
	"sync"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

// Emulator is an in-process S3 server (gofakes3 over memory, on a
// 127.0.0.1 port): the bucket the sections measure against. Every bucket it
// opens shares one HTTP client, as one process's clients would.
type Emulator struct {
	s3 *emulator.S3

	mu   sync.Mutex
	next int
}

// StartS3 starts the emulator. Close it when done.
func StartS3() (*Emulator, error) {
	s, err := emulator.StartS3()
	if err != nil {
		return nil, err
	}
	return &Emulator{s3: s}, nil
}

// NewBucket creates a fresh bucket (named after prefix and a counter) and
// returns its name.
func (e *Emulator) NewBucket(prefix string) (string, error) {
	e.mu.Lock()
	e.next++
	name := fmt.Sprintf("%s-%d", prefix, e.next)
	e.mu.Unlock()
	if err := e.s3.CreateBucket(name); err != nil {
		return "", err
	}
	return name, nil
}

// Raw opens bucket name as a plain *blob.Bucket: gocloud's s3blob, no
// verification of any kind.
func (e *Emulator) Raw(ctx context.Context, name string) (*blob.Bucket, error) {
	return e.s3.OpenBucket(ctx, name)
}

// Open opens bucket name through blobtier (verified reads, conditional
// writes, compare-and-swap on the ETag), as the engine uses it.
func (e *Emulator) Open(ctx context.Context, name string) (blobtier.Bucket, error) {
	raw, err := e.s3.OpenBucket(ctx, name)
	if err != nil {
		return nil, err
	}
	return blobtier.New(raw, blobtier.Options{}), nil
}

// Close stops the server and drops every bucket.
func (e *Emulator) Close() error { return e.s3.Close() }

// URL is the s3:// URL of bucket name on the emulator, as a separate
// process (serve --bucket) opens it (anonymous: gofakes3 checks no
// signature).
func (e *Emulator) URL(name string) string { return e.s3.URL(name) }
