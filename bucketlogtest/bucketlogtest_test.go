package bucketlogtest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/bucketlogtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gocloud's OpenCensus/OTel views and the AWS SDK keep package-level
		// goroutines; idle client connections end when the server closes.
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// roundTrip writes through a client and raw, and reads both back with their
// metadata, through OpenBucket and through the URL.
func roundTrip(t *testing.T, e bucketlogtest.Emulator, open func(url string) (*blob.Bucket, error)) {
	t.Helper()
	ctx := context.Background()
	if err := e.CreateBucket("b1"); err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(strings.TrimPrefix(e.Endpoint(), "http://")); host != "127.0.0.1" {
		t.Fatalf("endpoint %s is not on 127.0.0.1", e.Endpoint())
	}
	b, err := e.OpenBucket(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "k1", []byte("hello"), &blob.WriterOptions{Metadata: map[string]string{"length": "5"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.PutRaw("b1", "k2", []byte("raw bytes"), map[string]string{"xxh64": "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	u, err := open(e.URL("b1"))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, bb := range []*blob.Bucket{b, u} {
		got, err := bb.ReadAll(ctx, "k1")
		if err != nil || string(got) != "hello" {
			t.Fatalf("read k1 = %q, %v", got, err)
		}
		a, err := bb.Attributes(ctx, "k2")
		if err != nil || a.Metadata["xxh64"] != "0123456789abcdef" {
			t.Fatalf("attributes of raw k2 = %+v, %v", a, err)
		}
		got, err = bb.ReadAll(ctx, "k2")
		if err != nil || !bytes.Equal(got, []byte("raw bytes")) {
			t.Fatalf("read raw k2 = %q, %v", got, err)
		}
		if _, err := bb.ReadAll(ctx, "missing"); gcerrors.Code(err) != gcerrors.NotFound {
			t.Fatalf("read of a missing key: %v, want NotFound", err)
		}
	}
	if err := u.WriteAll(ctx, "k3", []byte("via url"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadAll(ctx, "k3"); err != nil || string(got) != "via url" {
		t.Fatalf("read k3 = %q, %v", got, err)
	}
	// Bucket is the engine's view: it compare-and-swaps on both emulators.
	tb, err := e.Bucket(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if !tb.CanCAS() {
		t.Fatal("Bucket cannot compare-and-swap")
	}
}

func TestS3RoundTripWithoutEnvironment(t *testing.T) {
	t.Parallel()
	roundTrip(t, bucketlogtest.NewS3(t), func(url string) (*blob.Bucket, error) { return blob.OpenBucket(context.Background(), url) })
}

func TestS3SignedURLWithEnvironment(t *testing.T) {
	s := bucketlogtest.NewS3(t)
	for k, v := range bucketlogtest.S3Env() {
		t.Setenv(k, v)
	}
	if err := s.CreateBucket("signed"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, s.URLSigned("signed")+"&request_checksum_calculation=when_required")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "k", []byte("signed"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadAll(ctx, "k"); err != nil || string(got) != "signed" {
		t.Fatalf("read = %q, %v", got, err)
	}
}

func TestGCSRoundTrip(t *testing.T) {
	g := bucketlogtest.NewGCS(t)
	for k, v := range g.Env() {
		t.Setenv(k, v)
	}
	roundTrip(t, g, func(url string) (*blob.Bucket, error) { return blob.OpenBucket(context.Background(), url) })
}

// NewBucket names a fresh bucket every time.
func TestNewBucket(t *testing.T) {
	t.Parallel()
	s := bucketlogtest.NewS3(t)
	name, err := s.NewBucket()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.OpenBucket(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(context.Background(), "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	if other, err := s.NewBucket(); err != nil || other == name {
		t.Fatalf("a second NewBucket = %q, %v (the first was %q)", other, err, name)
	}
}

// useLog is what a user's integration test does with a log: append, scan,
// read one execution, pull, ack.
func useLog(t *testing.T, l *bucketlog.Log) {
	t.Helper()
	ctx := context.Background()
	for i, exec := range []string{"order-1", "order-2", "order-1"} {
		if _, err := l.Append(ctx, bucketlog.Event{ExecutionID: exec, TransactionID: "tx-" + string(rune('a'+i)), Payload: "event " + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := l.Scan(ctx, 0, 10)
	if err != nil || len(page.Records) != 3 {
		t.Fatalf("scan = %+v, %v", page, err)
	}
	one, err := l.ReadExecution(ctx, "order-1", 0, 10)
	if err != nil || len(one.Page.Records) != 2 || one.Page.Records[1].Payload != "event c" {
		t.Fatalf("read order-1 = %+v, %v", one, err)
	}
	p, err := l.Pull(ctx, "projector", 2)
	if err != nil || len(p.Records) != 2 {
		t.Fatalf("pull = %+v, %v", p, err)
	}
	if acked, err := l.Ack(ctx, "projector", p.Records[1].Seq); err != nil || acked != 2 {
		t.Fatalf("ack = %d, %v", acked, err)
	}
	if _, err := l.Ship(ctx, true); err != nil {
		t.Fatalf("ship: %v", err)
	}
}

// OpenLog on S3 needs no environment, so the test may run in parallel; the
// log ships to its own fresh bucket.
func TestOpenLogOnS3(t *testing.T) {
	t.Parallel()
	s := bucketlogtest.NewS3(t)
	l := bucketlogtest.OpenLog(t, s, bucketlog.Options{})
	useLog(t, l)
	// The emulator is fresh, so OpenLog's bucket is its first NewBucket.
	raw, err := s.OpenBucket(context.Background(), "bucketlogtest-1")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if keys := listKeys(t, raw); len(keys) == 0 {
		t.Fatal("the log shipped nothing to its bucket")
	}
}

// OpenLog on GCS sets STORAGE_EMULATOR_HOST for the test.
func TestOpenLogOnGCS(t *testing.T) {
	g := bucketlogtest.NewGCS(t)
	useLog(t, bucketlogtest.OpenLog(t, g, bucketlog.Options{}))
}

// A GCS test that runs in parallel cannot set STORAGE_EMULATOR_HOST: it
// passes the bucket in code instead, closed after the log.
func TestOpenLogOnGCSBucketInParallel(t *testing.T) {
	t.Parallel()
	g := bucketlogtest.NewGCS(t)
	name, err := g.NewBucket()
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Bucket(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // registered first, so it runs after the log's Close
	useLog(t, bucketlogtest.OpenLog(t, g, bucketlog.Options{Bucket: b}))
}

// A restart: the same Dir and BucketURL reopen the shard with its events
// and its consumer's cursor; a fresh Dir hydrates from the bucket.
func TestOpenLogRestart(t *testing.T) {
	t.Parallel()
	s := bucketlogtest.NewS3(t)
	name, err := s.NewBucket()
	if err != nil {
		t.Fatal(err)
	}
	opts := bucketlog.Options{Dir: t.TempDir(), BucketURL: s.URL(name)}
	first := bucketlogtest.OpenLog(t, s, opts)
	useLog(t, first)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := bucketlogtest.OpenLog(t, s, opts)
	p, err := again.Pull(t.Context(), "projector", 10)
	if err != nil || len(p.Records) != 1 || p.Records[0].Seq != 3 {
		t.Fatalf("pull after the restart = %+v, %v", p, err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	// A lost disk: a fresh Dir on the same bucket hydrates from it.
	hydrated := bucketlogtest.OpenLog(t, s, bucketlog.Options{BucketURL: s.URL(name), Dir: t.TempDir()})
	if page, err := hydrated.Scan(t.Context(), 0, 10); err != nil || len(page.Records) != 3 {
		t.Fatalf("scan of the hydrated shard = %+v, %v", page, err)
	}
}

func listKeys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var keys []string
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
}

// OpenLog's cleanup closes the log: the shard's lock is released and its
// tail shipped when the test that opened it ends.
func TestOpenLogClosesAtCleanup(t *testing.T) {
	t.Parallel()
	s := bucketlogtest.NewS3(t)
	name, err := s.NewBucket()
	if err != nil {
		t.Fatal(err)
	}
	opts := bucketlog.Options{Dir: t.TempDir(), BucketURL: s.URL(name), TailInterval: time.Hour}
	t.Run("open", func(t *testing.T) {
		l := bucketlogtest.OpenLog(t, s, opts)
		if _, err := l.Append(context.Background(), bucketlog.Event{ExecutionID: "e", TransactionID: "t", Payload: "p"}); err != nil {
			t.Fatal(err)
		}
	})
	// A lost disk: a fresh directory hydrates the event from the bucket
	// only if the first log's Close shipped it.
	again := bucketlogtest.OpenLog(t, s, bucketlog.Options{BucketURL: s.URL(name)})
	if page, err := again.Scan(t.Context(), 0, 10); err != nil || len(page.Records) != 1 {
		t.Fatalf("after the first test's cleanup the bucket holds %+v, %v", page, err)
	}
	// The first directory is free again.
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	bucketlogtest.OpenLog(t, s, opts)
}
