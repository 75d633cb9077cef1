package emulator

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/bucketlog/bucketlog/blobtier"
)

// Region is the region of every S3 emulator URL and client.
const Region = "us-east-1"

// Static credentials of the S3 emulator (gofakes3 does not check them).
const (
	S3AccessKey = "bucketlog-emulator"
	S3SecretKey = "bucketlog-emulator-secret"
)

// S3 is gofakes3 over its in-memory backend on 127.0.0.1.
type S3 struct {
	backend *s3mem.Backend
	srv     *server
	hc      *http.Client // shared by the buckets OpenBucket returns
	names   atomic.Uint64
}

// StartS3 starts an S3 emulator. Close it when done.
func StartS3() (*S3, error) {
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv, err := listen(faker.Server())
	if err != nil {
		return nil, err
	}
	return &S3{backend: backend, srv: srv, hc: newHTTPClient()}, nil
}

// Endpoint is "http://127.0.0.1:PORT".
func (s *S3) Endpoint() string { return "http://" + s.srv.hostPort() }

// URL is the bucket's URL, opened with anonymous (unsigned) requests so it
// needs no credentials and no environment:
// s3://NAME?endpoint=http://127.0.0.1:PORT&use_path_style=true&region=us-east-1&anonymous=true
func (s *S3) URL(name string) string { return s.URLSigned(name) + "&anonymous=true" }

// URLSigned is the production-shaped URL, whose requests are signed with
// credentials from the environment: set S3Env first (t.Setenv).
// s3://NAME?endpoint=http://127.0.0.1:PORT&use_path_style=true&region=us-east-1
func (s *S3) URLSigned(name string) string {
	return fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=%s", name, s.Endpoint(), Region)
}

// Env is the environment URL needs: none.
func (s *S3) Env() map[string]string { return nil }

// S3Env is the environment a signed s3:// URL to an emulator needs: static
// credentials, and no shared config, credentials file or instance metadata
// lookup (so nothing on the machine is consulted).
func S3Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":           S3AccessKey,
		"AWS_SECRET_ACCESS_KEY":       S3SecretKey,
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
}

// CreateBucket creates a bucket; an existing one is an error.
func (s *S3) CreateBucket(name string) error {
	if err := s.backend.CreateBucket(name); err != nil {
		return fmt.Errorf("emulator: create s3 bucket %q: %w", name, err)
	}
	return nil
}

// NewBucket creates a bucket with a name no other NewBucket of this
// emulator returned, and returns the name.
func (s *S3) NewBucket() (string, error) {
	name := fmt.Sprintf("bucketlogtest-%d", s.names.Add(1))
	return name, s.CreateBucket(name)
}

// OpenBucket opens a bucket of this emulator as a portable gocloud bucket
// (no verification of any kind), with a client built in code: it reads no
// environment.
func (s *S3) OpenBucket(ctx context.Context, name string) (*blob.Bucket, error) {
	return OpenS3Bucket(ctx, s.Endpoint(), name, s.hc)
}

// Bucket opens a bucket of this emulator as bucketlog.Options.Bucket takes
// it (verified reads, conditional writes, compare-and-swap), reading no
// environment. The caller closes it, after every log using it.
func (s *S3) Bucket(ctx context.Context, name string) (blobtier.Bucket, error) {
	raw, err := s.OpenBucket(ctx, name)
	if err != nil {
		return nil, err
	}
	return blobtier.New(raw, blobtier.Options{}), nil
}

// OpenS3Bucket opens bucket name on any S3-compatible endpoint
// ("http://HOST:PORT": an emulator in another process, a proxy or a
// blackhole a test controls) with the emulator's static credentials,
// without reading the environment. A nil hc uses a client of its own.
func OpenS3Bucket(ctx context.Context, endpoint, name string, hc *http.Client) (*blob.Bucket, error) {
	if hc == nil {
		hc = newHTTPClient()
	}
	cfg := aws.Config{
		Region:                     Region,
		Credentials:                credentials.NewStaticCredentialsProvider(S3AccessKey, S3SecretKey, ""),
		HTTPClient:                 hc,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
	b, err := s3blob.OpenBucket(ctx, client, name, &s3blob.Options{RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired})
	if err != nil {
		return nil, fmt.Errorf("emulator: open s3 bucket %q: %w", name, err)
	}
	return b, nil
}

// PutRaw stores data under key in bucket straight in the backend, with meta
// as user metadata (keys as a client would send them, e.g. "length"),
// bypassing every client-side check: to plant a corrupt or foreign object
// at rest.
func (s *S3) PutRaw(bucket, key string, data []byte, meta map[string]string) error {
	md := make(map[string]string, len(meta)+1)
	for k, v := range meta {
		md[textproto.CanonicalMIMEHeaderKey("X-Amz-Meta-"+k)] = v
	}
	md["Content-Type"] = "application/octet-stream"
	if _, err := s.backend.PutObject(bucket, key, md, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		return fmt.Errorf("emulator: raw put s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// Close stops the server and drops its contents.
func (s *S3) Close() error {
	err := s.srv.close()
	s.hc.CloseIdleConnections()
	return err
}
