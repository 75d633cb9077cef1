package blobtier_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/backendtest"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Package-level workers of gocloud's OpenCensus views.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		// Idle keep-alive connections of clients built by the URL openers
		// (their transports are not reachable to close); they end when the
		// emulator that serves them closes.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// raws maps each Bucket handed to the suite to the way of writing objects
// at rest in the bucket it was made on.
type raws struct{ m sync.Map }

type rawPut func(key string, data []byte, meta map[string]string) error

func (r *raws) add(b blobtier.Bucket, put rawPut) blobtier.Bucket {
	r.m.Store(b, put)
	return b
}

func (r *raws) put(t *testing.T, b blobtier.Bucket, key string, data []byte, meta map[string]string) {
	t.Helper()
	put, ok := r.m.Load(b)
	if !ok {
		t.Fatalf("no raw writer for %v", b)
	}
	if err := put.(rawPut)(key, data, meta); err != nil {
		t.Fatalf("raw put %s: %v", key, err)
	}
}

// blobPut writes through a raw *blob.Bucket with forged metadata.
func blobPut(raw *blob.Bucket) rawPut {
	return func(key string, data []byte, meta map[string]string) error {
		return raw.WriteAll(context.Background(), key, data, &blob.WriterOptions{Metadata: meta, ContentType: "application/octet-stream"})
	}
}

var bucketSeq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, bucketSeq.Add(1))
}

func mustOpen(t *testing.T, url string, opts blobtier.Options) blobtier.Bucket {
	t.Helper()
	b, err := blobtier.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformanceMemblob(t *testing.T) {
	var r raws
	caps := backendtest.Caps{Races: true, PutRaw: r.put}
	t.Run("New", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			raw := memblob.OpenBucket(nil)
			return r.add(blobtier.New(raw, blobtier.Options{}), blobPut(raw))
		}, caps)
	})
	t.Run("OpenNamed", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			name := uniqueName("conformance")
			b := mustOpen(t, "mem://"+name, blobtier.Options{})
			return r.add(b, blobPut(blobtier.NamedMemForTest(name)))
		}, caps)
	})
	t.Run("OpenFresh", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			return mustOpen(t, "mem://", blobtier.Options{})
		}, backendtest.Caps{Races: true})
	})
}

func TestConformanceFileblob(t *testing.T) {
	var r raws
	// Not Races: fileblob's create-if-absent is stat-then-rename.
	caps := backendtest.Caps{PutRaw: r.put}
	t.Run("New", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			raw, err := fileblob.OpenBucket(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return r.add(blobtier.New(raw, blobtier.Options{}), blobPut(raw))
		}, caps)
	})
	t.Run("Open", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			dir := filepath.Join(t.TempDir(), "bucket")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			raw, err := fileblob.OpenBucket(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { raw.Close() })
			return r.add(mustOpen(t, "file://"+dir, blobtier.Options{}), blobPut(raw))
		}, caps)
	})
}

func startS3(t *testing.T) *emulator.S3 {
	t.Helper()
	s, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startGCS(t *testing.T) *emulator.GCS {
	t.Helper()
	g, err := emulator.StartGCS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func blackhole(t *testing.T) *emulator.Blackhole {
	t.Helper()
	h, err := emulator.StartBlackhole()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestConformanceS3(t *testing.T) {
	s := startS3(t)
	var r raws
	newBucket := func(t *testing.T, open func(name string) blobtier.Bucket) blobtier.Bucket {
		name := uniqueName("s3")
		if err := s.CreateBucket(name); err != nil {
			t.Fatal(err)
		}
		b := open(name)
		if got := blobtier.CASModeForTest(b); got != "s3" {
			t.Fatalf("compare-and-swap mode %q, want s3", got)
		}
		return r.add(b, func(key string, data []byte, meta map[string]string) error { return s.PutRaw(name, key, data, meta) })
	}
	h := blackhole(t)
	t.Run("New", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			return newBucket(t, func(name string) blobtier.Bucket {
				raw, err := s.OpenBucket(context.Background(), name)
				if err != nil {
					t.Fatal(err)
				}
				return blobtier.New(raw, blobtier.Options{})
			})
		}, backendtest.Caps{CAS: true, Races: true, PutRaw: r.put, Hung: func(t *testing.T, timeout time.Duration) blobtier.Bucket {
			raw, err := emulator.OpenS3Bucket(context.Background(), h.Endpoint(), "hung", nil)
			if err != nil {
				t.Fatal(err)
			}
			return blobtier.New(raw, blobtier.Options{Timeout: timeout})
		}})
	})
	t.Run("Open", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			return newBucket(t, func(name string) blobtier.Bucket { return mustOpen(t, s.URL(name), blobtier.Options{}) })
		}, backendtest.Caps{CAS: true, Races: true, PutRaw: r.put, Hung: func(t *testing.T, timeout time.Duration) blobtier.Bucket {
			return mustOpen(t, "s3://hung?endpoint="+h.Endpoint()+"&use_path_style=true&region=us-east-1&anonymous=true", blobtier.Options{Timeout: timeout})
		}})
	})
	t.Run("OpenSigned", func(t *testing.T) {
		for k, v := range emulator.S3Env() {
			t.Setenv(k, v)
		}
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			return newBucket(t, func(name string) blobtier.Bucket { return mustOpen(t, s.URLSigned(name), blobtier.Options{}) })
		}, backendtest.Caps{CAS: true, Races: true, PutRaw: r.put})
	})
}

func TestConformanceGCS(t *testing.T) {
	g := startGCS(t)
	var r raws
	newBucket := func(t *testing.T, open func(name string) blobtier.Bucket) blobtier.Bucket {
		name := uniqueName("gcs")
		if err := g.CreateBucket(name); err != nil {
			t.Fatal(err)
		}
		b := open(name)
		if got := blobtier.CASModeForTest(b); got != "gcs" {
			t.Fatalf("compare-and-swap mode %q, want gcs", got)
		}
		return r.add(b, func(key string, data []byte, meta map[string]string) error { return g.PutRaw(name, key, data, meta) })
	}
	h := blackhole(t)
	hung := func(t *testing.T, timeout time.Duration) blobtier.Bucket {
		raw, err := emulator.OpenGCSBucket(context.Background(), h.Endpoint(), "hung", nil)
		if err != nil {
			t.Fatal(err)
		}
		return blobtier.New(raw, blobtier.Options{Timeout: timeout})
	}
	t.Run("New", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			return newBucket(t, func(name string) blobtier.Bucket {
				raw, err := g.OpenBucket(context.Background(), name)
				if err != nil {
					t.Fatal(err)
				}
				return blobtier.New(raw, blobtier.Options{})
			})
		}, backendtest.Caps{CAS: true, Races: true, PutRaw: r.put, Hung: hung})
	})
	t.Run("Open", func(t *testing.T) {
		for k, v := range g.Env() {
			t.Setenv(k, v)
		}
		backendtest.Run(t, func(t *testing.T) blobtier.Bucket {
			return newBucket(t, func(name string) blobtier.Bucket { return mustOpen(t, g.URL(name), blobtier.Options{}) })
		}, backendtest.Caps{CAS: true, Races: true, PutRaw: r.put})
	})
}
