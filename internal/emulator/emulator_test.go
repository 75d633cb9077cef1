package emulator

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
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

type emu interface {
	CreateBucket(string) error
	OpenBucket(context.Context, string) (*blob.Bucket, error)
	PutRaw(bucket, key string, data []byte, meta map[string]string) error
	URL(string) string
	Endpoint() string
	Close() error
}

// roundTrip writes through a client and raw, and reads both back with their
// metadata, through OpenBucket and through the URL.
func roundTrip(t *testing.T, e emu, open func(url string) (*blob.Bucket, error)) {
	ctx := context.Background()
	if err := e.CreateBucket("b1"); err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(e.Endpoint()[len("http://"):]); host != "127.0.0.1" {
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
}

func TestS3RoundTripWithoutEnvironment(t *testing.T) {
	s, err := StartS3()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	roundTrip(t, s, func(url string) (*blob.Bucket, error) { return blob.OpenBucket(context.Background(), url) })
}

func TestS3SignedURLWithEnvironment(t *testing.T) {
	s, err := StartS3()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range S3Env() {
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
	g, err := StartGCS()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for k, v := range g.Env() {
		t.Setenv(k, v)
	}
	roundTrip(t, g, func(url string) (*blob.Bucket, error) { return blob.OpenBucket(context.Background(), url) })
}

// A hung server holds a request until its deadline; the Blackhole is that
// server.
func TestBlackholeHoldsRequestsUntilTheDeadline(t *testing.T) {
	h, err := StartBlackhole()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err := OpenS3Bucket(context.Background(), h.Endpoint(), "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := b.ReadAll(ctx, "k"); err == nil || ctx.Err() == nil {
		t.Fatalf("read from a blackhole = %v before the deadline", err)
	}
}
