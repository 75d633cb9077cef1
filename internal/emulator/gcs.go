package emulator

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"google.golang.org/api/option"

	"github.com/bucketlog/bucketlog/blobtier"
)

// EnvGCSHost is the variable gcsblob and the storage client read to talk
// to an emulator: host:port, no scheme.
const EnvGCSHost = "STORAGE_EMULATOR_HOST"

// GCS is fake-gcs-server over its in-memory backend on 127.0.0.1.
type GCS struct {
	fake  *fakestorage.Server
	srv   *server
	hc    *http.Client // shared by the buckets OpenBucket returns
	names atomic.Uint64
}

// StartGCS starts a GCS emulator. Close it when done.
//
// The fake server is built without its own listener and served on ours, so
// the address is known before it is configured: its public host must be
// 127.0.0.1 (the storage client reads objects from http://HOST:PORT/BUCKET/
// OBJECT, and without a matching public host every read is NotFound), and
// resumable uploads are told to come back to the same address.
func StartGCS() (*GCS, error) {
	srv, err := bind()
	if err != nil {
		return nil, err
	}
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		NoListener:  true,
		Scheme:      "http",
		Host:        "127.0.0.1",
		PublicHost:  "127.0.0.1",
		ExternalURL: "http://" + srv.hostPort(),
	})
	if err != nil {
		_ = srv.close()
		return nil, fmt.Errorf("emulator: start fake-gcs-server: %w", err)
	}
	srv.serve(fake.HTTPHandler())
	return &GCS{fake: fake, srv: srv, hc: newHTTPClient()}, nil
}

// Host is "127.0.0.1:PORT", the value of STORAGE_EMULATOR_HOST.
func (g *GCS) Host() string { return g.srv.hostPort() }

// Endpoint is "http://127.0.0.1:PORT".
func (g *GCS) Endpoint() string { return "http://" + g.Host() }

// URL is "gs://NAME". It reaches this emulator only while
// STORAGE_EMULATOR_HOST is Host() (see Env).
func (g *GCS) URL(name string) string { return "gs://" + name }

// Env is the environment URL needs: STORAGE_EMULATOR_HOST=Host(). It is
// process-wide: set it with t.Setenv, in a test that does not run in
// parallel.
func (g *GCS) Env() map[string]string { return map[string]string{EnvGCSHost: g.Host()} }

// CreateBucket creates a bucket.
func (g *GCS) CreateBucket(name string) error {
	g.fake.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	if _, err := g.fake.Backend().GetBucket(name); err != nil {
		return fmt.Errorf("emulator: create gcs bucket %q: %w", name, err)
	}
	return nil
}

// NewBucket creates a bucket with a name no other NewBucket of this
// emulator returned, and returns the name.
func (g *GCS) NewBucket() (string, error) {
	name := fmt.Sprintf("bucketlogtest-%d", g.names.Add(1))
	return name, g.CreateBucket(name)
}

// OpenBucket opens a bucket of this emulator as a portable gocloud bucket
// over real HTTP (so request contexts and deadlines are honoured), reading
// no environment.
func (g *GCS) OpenBucket(ctx context.Context, name string) (*blob.Bucket, error) {
	return OpenGCSBucket(ctx, g.Endpoint(), name, g.hc)
}

// Bucket opens a bucket of this emulator as bucketlog.Options.Bucket takes
// it (verified reads, conditional writes, compare-and-swap), reading no
// environment. The caller closes it, after every log using it.
func (g *GCS) Bucket(ctx context.Context, name string) (blobtier.Bucket, error) {
	raw, err := g.OpenBucket(ctx, name)
	if err != nil {
		return nil, err
	}
	return blobtier.New(raw, blobtier.Options{}), nil
}

// OpenGCSBucket opens bucket name on a GCS-compatible endpoint
// ("http://HOST:PORT") without credentials, reading no environment. A nil
// hc uses a client of its own. The JSON/HTTP storage client holds no
// resources beyond hc's idle connections, which end when the server closes
// them.
func OpenGCSBucket(ctx context.Context, endpoint, name string, hc *http.Client) (*blob.Bucket, error) {
	if hc == nil {
		hc = newHTTPClient()
	}
	client, err := storage.NewClient(ctx,
		option.WithEndpoint(endpoint+"/storage/v1/"),
		option.WithoutAuthentication(),
		option.WithHTTPClient(hc),
	)
	if err != nil {
		return nil, fmt.Errorf("emulator: gcs client for %s: %w", endpoint, err)
	}
	b, err := gcsblob.OpenBucket(ctx, nil, name, &gcsblob.Options{Client: client})
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("emulator: open gcs bucket %q: %w", name, err)
	}
	return b, nil
}

// PutRaw stores data under key in bucket straight in the backend, with meta
// as user metadata, bypassing every client-side check. The emulator computes
// its own CRC32C and MD5 of data, so the storage client's checks pass and
// only bucketlog's own digest can catch a corrupt object.
func (g *GCS) PutRaw(bucket, key string, data []byte, meta map[string]string) error {
	obj := fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{
			BucketName:  bucket,
			Name:        key,
			ContentType: "application/octet-stream",
			Metadata:    meta,
		},
		Content: data,
	}
	if err := g.fake.CreateObjectStreaming(obj.StreamingObject()); err != nil {
		return fmt.Errorf("emulator: raw put gs://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// Close stops the server and drops its contents.
func (g *GCS) Close() error {
	err := g.srv.close()
	g.fake.Stop()
	g.hc.CloseIdleConnections()
	return err
}
