package blobtier_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/memcas"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

// reqCount counts the requests a bucket sends, by kind ("GET", "HEAD",
// "PUT", "DELETE", ...): what a provider bills.
type reqCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *reqCount) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[kind]++
}

// take returns the counts so far and starts again from zero.
func (c *reqCount) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	if n == nil {
		n = map[string]int{}
	}
	return n
}

type countingTransport struct {
	c    *reqCount
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.add(r.Method)
	return t.next.RoundTrip(r)
}

func countingClient(c *reqCount) *http.Client {
	return &http.Client{Transport: countingTransport{c, http.DefaultTransport.(*http.Transport).Clone()}}
}

// countingDriver counts a memcas driver's calls in the HTTP terms they
// stand for (Attributes is a HEAD, a reader a GET, a delete a DELETE).
type countingDriver struct {
	driver.Bucket
	c *reqCount
}

func (d countingDriver) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	d.c.add("HEAD")
	return d.Bucket.Attributes(ctx, key)
}

func (d countingDriver) NewRangeReader(ctx context.Context, key string, off, n int64, o *driver.ReaderOptions) (driver.Reader, error) {
	d.c.add("GET")
	return d.Bucket.NewRangeReader(ctx, key, off, n, o)
}

func (d countingDriver) NewTypedWriter(ctx context.Context, key, ct string, o *driver.WriterOptions) (driver.Writer, error) {
	d.c.add("PUT")
	return d.Bucket.NewTypedWriter(ctx, key, ct, o)
}

func (d countingDriver) Delete(ctx context.Context, key string, o *driver.DeleteOptions) error {
	d.c.add("DELETE")
	return d.Bucket.Delete(ctx, key, o)
}

// countedBackend is a bucket on one backend whose requests are counted, and
// a way to plant an object at rest.
type countedBackend struct {
	b      blobtier.Bucket
	c      *reqCount
	putRaw func(key string, data []byte, meta map[string]string) error
}

func countedBackends(t *testing.T) map[string]func(t *testing.T) countedBackend {
	return map[string]func(t *testing.T) countedBackend{
		"gofakes3": func(t *testing.T) countedBackend {
			s := startS3(t)
			name := uniqueName("req")
			if err := s.CreateBucket(name); err != nil {
				t.Fatal(err)
			}
			c := &reqCount{}
			raw, err := emulator.OpenS3Bucket(context.Background(), s.Endpoint(), name, countingClient(c))
			if err != nil {
				t.Fatal(err)
			}
			b := blobtier.New(raw, blobtier.Options{})
			t.Cleanup(func() { b.Close() })
			return countedBackend{b, c, func(k string, d []byte, m map[string]string) error { return s.PutRaw(name, k, d, m) }}
		},
		"fake-gcs-server": func(t *testing.T) countedBackend {
			g := startGCS(t)
			name := uniqueName("req")
			if err := g.CreateBucket(name); err != nil {
				t.Fatal(err)
			}
			c := &reqCount{}
			raw, err := emulator.OpenGCSBucket(context.Background(), g.Endpoint(), name, countingClient(c))
			if err != nil {
				t.Fatal(err)
			}
			b := blobtier.New(raw, blobtier.Options{})
			t.Cleanup(func() { b.Close() })
			return countedBackend{b, c, func(k string, d []byte, m map[string]string) error { return g.PutRaw(name, k, d, m) }}
		},
		"memcas": func(t *testing.T) countedBackend {
			mc := memcas.New(nil)
			c := &reqCount{}
			b := blobtier.New(blob.NewBucket(countingDriver{mc, c}), blobtier.Options{})
			t.Cleanup(func() { b.Close() })
			return countedBackend{b, c, func(k string, d []byte, m map[string]string) error {
				return blob.NewBucket(mc).WriteAll(context.Background(), k, d, &blob.WriterOptions{Metadata: m})
			}}
		},
	}
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A verified read is one GET: the response carries the metadata (length,
// xxh64, epoch) and the version token, so no HEAD goes first. Damage is
// still found, and a damaged object's token is still returned.
func TestVerifiedReadIsOneGet(t *testing.T) {
	ctx := context.Background()
	for name, open := range countedBackends(t) {
		t.Run(name, func(t *testing.T) {
			cb := open(t)
			key := blobtier.TailKey(7, 10, 20)
			data := []byte("a tail batch's bytes")
			if err := cb.b.PutIfAbsent(ctx, key, data, 5); err != nil {
				t.Fatal(err)
			}
			cb.c.take()
			got, m, err := cb.b.Get(ctx, key)
			if err != nil || string(got) != string(data) || m != blobtier.MetaOf(data, 5) {
				t.Fatalf("Get: %q %+v %v", got, m, err)
			}
			if n := cb.c.take(); !sameCounts(n, map[string]int{"GET": 1}) {
				t.Fatalf("Get sent %v, want one GET", n)
			}

			cur := blobtier.CursorKey(7)
			if err := cb.b.CompareAndSwap(ctx, cur, []byte("v1"), ""); err != nil {
				t.Fatal(err)
			}
			cb.c.take()
			_, v, err := cb.b.GetVersioned(ctx, cur)
			if err != nil {
				t.Fatal(err)
			}
			if n := cb.c.take(); !sameCounts(n, map[string]int{"GET": 1}) {
				t.Fatalf("GetVersioned sent %v, want one GET", n)
			}
			if err := cb.b.CompareAndSwap(ctx, cur, []byte("v2"), v); err != nil {
				t.Fatalf("swap on the token of a one-GET read: %v", err)
			}
			if err := cb.b.CompareAndSwap(ctx, cur, []byte("v3"), v); !errors.Is(err, blobtier.ErrPrecondition) {
				t.Fatalf("swap on a stale token: %v, want ErrPrecondition", err)
			}

			// Damage at rest: same metadata, other bytes.
			bad := []byte("a tail batch's bytez")
			dkey := blobtier.TailKey(7, 21, 30)
			if err := cb.putRaw(dkey, bad, blobtier.MetaOf(data, 5).Encode()); err != nil {
				t.Fatal(err)
			}
			if _, _, err := cb.b.Get(ctx, dkey); !errors.Is(err, blobtier.ErrCorrupt) {
				t.Fatalf("Get of a damaged object: %v, want ErrCorrupt", err)
			}
			if _, v, err := cb.b.GetVersioned(ctx, dkey); !errors.Is(err, blobtier.ErrCorrupt) || v == "" {
				t.Fatalf("GetVersioned of a damaged object: %q %v, want its token and ErrCorrupt", v, err)
			}
			// Missing metadata: corrupt, not trusted.
			nkey := blobtier.TailKey(7, 31, 40)
			if err := cb.putRaw(nkey, data, nil); err != nil {
				t.Fatal(err)
			}
			if _, _, err := cb.b.Get(ctx, nkey); !errors.Is(err, blobtier.ErrCorrupt) {
				t.Fatalf("Get of an object without metadata: %v, want ErrCorrupt", err)
			}
			if _, _, err := cb.b.Get(ctx, blobtier.TailKey(7, 41, 50)); !errors.Is(err, blobtier.ErrNotFound) {
				t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
			}
		})
	}
}
