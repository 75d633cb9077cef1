package reclaim

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/internal/emulator"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gocloud's OpenCensus views and idle HTTP client connections keep
		// goroutines that are not ours; they end with the process.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// s3Bucket starts gofakes3 on 127.0.0.1 and returns a CAS-capable bucket on
// it, closed with the test.
func s3Bucket(t testing.TB) blobtier.Bucket {
	t.Helper()
	return wrapBucket(t, s3Blob(t))
}

// s3Blob is the *blob.Bucket under s3Bucket, for tests that put a fault
// injector between it and blobtier.
func s3Blob(t testing.TB) *blob.Bucket {
	t.Helper()
	e, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBucket("reclaim"); err != nil {
		t.Fatal(err)
	}
	bb, err := e.OpenBucket(context.Background(), "reclaim")
	if err != nil {
		t.Fatal(err)
	}
	return bb
}

// wrapBucket wraps bb in blobtier, closed with the test, and checks it can
// compare-and-swap.
func wrapBucket(t testing.TB, bb *blob.Bucket) blobtier.Bucket {
	t.Helper()
	b := blobtier.New(bb, blobtier.Options{Timeout: 30 * time.Second})
	t.Cleanup(func() { b.Close() })
	if !b.CanCAS() {
		t.Fatal("the emulated bucket cannot compare-and-swap")
	}
	return b
}

// gcsBucket is s3Bucket on fake-gcs-server.
func gcsBucket(t testing.TB) blobtier.Bucket {
	t.Helper()
	e, err := emulator.StartGCS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return openOn(t, e.CreateBucket, e.OpenBucket)
}

func openOn(t testing.TB, create func(string) error, open func(context.Context, string) (*blob.Bucket, error)) blobtier.Bucket {
	t.Helper()
	if err := create("reclaim"); err != nil {
		t.Fatal(err)
	}
	bb, err := open(context.Background(), "reclaim")
	if err != nil {
		t.Fatal(err)
	}
	return wrapBucket(t, bb)
}
