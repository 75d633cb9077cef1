package bucketlogtest

import (
	"context"
	"log/slog"
	"testing"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog"
)

// Emulator is what S3 and GCS offer alike.
type Emulator interface {
	// Endpoint is "http://127.0.0.1:PORT".
	Endpoint() string
	// CreateBucket creates a bucket; NewBucket creates one with a fresh
	// name and returns the name.
	CreateBucket(name string) error
	NewBucket() (string, error)
	// URL is the bucket's URL for bucketlog.Options.BucketURL or
	// blobtier.Open; Env is the environment it needs (see the package
	// documentation).
	URL(name string) string
	Env() map[string]string
	// OpenBucket is the bucket as a portable gocloud bucket; Bucket is the
	// bucket as bucketlog.Options.Bucket takes it. Neither reads the
	// environment; the caller closes what they return.
	OpenBucket(ctx context.Context, name string) (*blob.Bucket, error)
	Bucket(ctx context.Context, name string) (bucketlog.Bucket, error)
	// PutRaw plants an object at rest, bypassing every client-side check.
	PutRaw(bucket, key string, data []byte, meta map[string]string) error
	Close() error
}

var (
	_ Emulator = (*S3)(nil)
	_ Emulator = (*GCS)(nil)
)

// OpenLog opens a bucketlog.Log on e for the test t, and closes it with
// t.Cleanup (Close ships the tail, so close e after: NewS3 and NewGCS do).
// The zero fields of opts are filled in:
//
//   - Dir: a fresh t.TempDir();
//   - BucketURL, when Bucket is nil too: a fresh bucket of e (NewBucket),
//     by URL, with the URL's Env set by t.Setenv (none for S3; for GCS
//     STORAGE_EMULATOR_HOST, so such a test cannot run in parallel: pass
//     opts.Bucket from e.Bucket there instead);
//   - Logger: warnings and errors to t's output.
//
// Everything else is bucketlog's default. A log that does not open fails t
// at once. To reopen a shard (a restart), give both calls the same Dir
// and BucketURL (e.URL of a bucket from e.NewBucket), closing the first
// log before the second opens.
func OpenLog(t testing.TB, e Emulator, opts bucketlog.Options) *bucketlog.Log {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.BucketURL == "" && opts.Bucket == nil {
		name, err := e.NewBucket()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range e.Env() {
			t.Setenv(k, v)
		}
		opts.BucketURL = e.URL(name)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	l, err := bucketlog.Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("bucketlogtest: open a log on %s: %v", e.Endpoint(), err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("bucketlogtest: close the log: %v", err)
		}
	})
	return l
}
