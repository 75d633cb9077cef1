package blobtier_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/bucketlog/bucketlog/blobtier"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"s3://bucket?region=us-east-1", "s3://bucket?region=us-east-1"},
		{"s3://AKIAEXAMPLE:s3cr3t@bucket?region=eu", "s3://REDACTED@bucket?region=eu"},
		{"gs://b?access_id=me&private_key_path=/k.pem", "gs://b?access_id=me&private_key_path=REDACTED"},
		{"s3://b?endpoint=http://127.0.0.1:9000&aws_secret_access_key=abc&region=x", "s3://b?endpoint=http://127.0.0.1:9000&aws_secret_access_key=REDACTED&region=x"},
		{"s3://b?X-Amz-Security-Token=tok&X-Amz-Signature=sig&X-Amz-Credential=cred", "s3://b?X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED"},
		{"s3://b?sig=abc&session=s&password=p&auth=a", "s3://b?sig=REDACTED&session=REDACTED&password=REDACTED&auth=REDACTED"},
		{"file:///var/lib/bucket?create_dir=1", "file:///var/lib/bucket?create_dir=1"},
		{"mem://", "mem://"},
		{"mem://name?prefix=a/", "mem://name?prefix=a/"},
		{"://nonsense%zz", "<unparseable URL (redacted)>"},
	} {
		if got := blobtier.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestRedactNested: secrets inside a parameter's value — userinfo of an
// endpoint= URL, its own query, a ;-separated parameter, percent-encoded
// spellings — never survive, and the rest of the URL does.
func TestRedactNested(t *testing.T) {
	for _, c := range []struct{ in, keep string }{
		{"s3://b?endpoint=http://user:PASSWORD1@minio:9000&region=x", "minio"},
		{"s3://b?region=x;token=PASSWORD1", "region=x"},
		{"s3://b?endpoint=http://minio:9000;token=PASSWORD1", "minio"},
		{"s3://b?endpoint=http%3A%2F%2Fminio%3A9000%3Ftoken%3DPASSWORD1", "minio"},
		{"s3://b?endpoint=http%3A%2F%2Fu%3APASSWORD1%40minio%3A9000", "minio"},
		{"s3://b?endpoint=http://minio:9000/?X-Amz-Signature=PASSWORD1%26a=b", "minio"},
		{"s3://b?endpoint=http%253A%252F%252Fu%253APASSWORD1%2540minio", "minio"},
		{"gs://b?opts=secret%3DPASSWORD1", "gs://b"},
		{"s3://b?x=%zzPASSWORD1", "s3://b"},
	} {
		got := blobtier.Redact(c.in)
		if strings.Contains(got, "PASSWORD1") || !strings.Contains(got, c.keep) || !strings.Contains(got, "REDACTED") {
			t.Errorf("Redact(%q) = %q: leaks the secret or loses %q", c.in, got, c.keep)
		}
	}
	// A URL without secrets is returned byte for byte.
	for _, in := range []string{"s3://b?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1&anonymous=true", "mem://", "gs://b?prefix=a=b/"} {
		if got := blobtier.Redact(in); got != in {
			t.Errorf("Redact(%q) = %q, want it unchanged", in, got)
		}
	}
}

func TestOpenErrorsNameTheURLWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	// Without an emulator host, gcsblob would look for Application Default
	// Credentials (and probe the GCE metadata server).
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1")
	for _, c := range []struct {
		url, secret, want string
	}{
		{"ftp://user:hunter22@host/x", "hunter22", "unsupported scheme"},
		{"s3://AKIA:topsecret@bucket?region=x&nonsense=1", "topsecret", "nonsense"},
		{"s3://bucket?region=x&aws_session_token=tok123&nonsense=1", "tok123", "aws_session_token=REDACTED"},
		{"gs://bucket?bogus=1&secret_thing=swordfish", "swordfish", "gs://bucket"},
		{"mem://name?token=abcdef", "abcdef", "only prefix"},
		{"mem://?key=x", "", "key= parameter"},
		{"bucket-without-scheme", "", "no scheme"},
		{"://nonsense%zz", "nonsense", "not a URL"},
	} {
		b, err := blobtier.Open(ctx, c.url, blobtier.Options{})
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", c.url)
			continue
		}
		var oe *blobtier.OpenError
		if !errors.As(err, &oe) {
			t.Errorf("Open(%q): %T, want *OpenError", c.url, err)
		}
		msg := err.Error()
		if c.secret != "" && strings.Contains(msg, c.secret) {
			t.Errorf("Open(%q) error leaks the secret: %s", c.url, msg)
		}
		if !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "blobtier: open bucket ") {
			t.Errorf("Open(%q) error %q, want it to mention %q", c.url, msg, c.want)
		}
	}
}

// mem://NAME is one bucket per name in the process; mem:// is a new one per
// Open; prefix= isolates.
func TestOpenMemNamedIsShared(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("shared")
	a := mustOpen(t, "mem://"+name, blobtier.Options{})
	key := blobtier.SegmentKey(0, 1)
	if err := a.PutIfAbsent(ctx, key, []byte("one"), 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, "mem://"+name, blobtier.Options{})
	defer b.Close()
	if got, _, err := b.Get(ctx, key); err != nil || string(got) != "one" {
		t.Fatalf("reopened named mem: %q, %v", got, err)
	}
	p := mustOpen(t, "mem://"+name+"?prefix=other/", blobtier.Options{})
	defer p.Close()
	if _, _, err := p.Get(ctx, key); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("prefixed view sees the unprefixed key: %v", err)
	}
	if err := p.PutIfAbsent(ctx, key, []byte("two"), 0); err != nil {
		t.Fatal(err)
	}
	if got, err := blobtier.NamedMemForTest(name).ReadAll(ctx, "other/"+key); err != nil || string(got) != "two" {
		t.Fatalf("prefixed object at rest: %q, %v", got, err)
	}
	fresh := mustOpen(t, "mem://", blobtier.Options{})
	defer fresh.Close()
	if _, _, err := fresh.Get(ctx, key); !errors.Is(err, blobtier.ErrNotFound) {
		t.Fatalf("mem:// is not fresh: %v", err)
	}
}

// recordingS3 is gofakes3 behind a handler that records request headers.
type recordingS3 struct {
	mu      sync.Mutex
	headers []http.Header
	url     string
	srv     *http.Server
}

func startRecordingS3(t *testing.T, bucket string) *recordingS3 {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(backend).Server()
	r := &recordingS3{}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPut {
			r.mu.Lock()
			r.headers = append(r.headers, req.Header.Clone())
			r.mu.Unlock()
		}
		fake.ServeHTTP(w, req)
	})}
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.srv.Close() })
	r.url = "s3://" + bucket + "?endpoint=http://" + ln.Addr().String() + "&use_path_style=true&region=us-east-1&anonymous=true"
	return r
}

func (r *recordingS3) checksumHeaders() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, h := range r.headers {
		for k := range h {
			lk := strings.ToLower(k)
			if strings.HasPrefix(lk, "x-amz-checksum-") || lk == "x-amz-sdk-checksum-algorithm" || lk == "x-amz-trailer" {
				out = append(out, k)
			}
		}
	}
	return out
}

// Open spells "request checksum calculation when required" for S3-compatible
// endpoints: no checksum header or trailer reaches the server. The control
// (the SDK default, when_supported, asked for explicitly) sends one.
func TestOpenS3EndpointChecksumWhenRequired(t *testing.T) {
	ctx := context.Background()
	put := func(extra string) []string {
		r := startRecordingS3(t, "ck")
		b := mustOpen(t, r.url+extra, blobtier.Options{})
		defer b.Close()
		key := blobtier.SegmentKey(0, 1)
		if err := b.PutIfAbsent(ctx, key, bytes.Repeat([]byte("x"), 100), 0); err != nil {
			t.Fatal(err)
		}
		if got, _, err := b.Get(ctx, key); err != nil || len(got) != 100 {
			t.Fatalf("get: %d bytes, %v", len(got), err)
		}
		return r.checksumHeaders()
	}
	if got := put(""); len(got) != 0 {
		t.Fatalf("checksum headers sent with Open's default: %v", got)
	}
	if got := put("&request_checksum_calculation=when_supported"); len(got) == 0 {
		t.Fatal("control: when_supported sent no checksum header, so this test cannot tell the settings apart")
	}
}

// Missing Google credentials are a clear error at Open, not a warning on
// stdout and a bucket that fails later.
func TestOpenGSWithoutCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/missing.json")
	_, err := blobtier.Open(context.Background(), "gs://some-bucket", blobtier.Options{})
	var oe *blobtier.OpenError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "Application Default Credentials") {
		t.Fatalf("Open without credentials: %v", err)
	}
	// anonymous=true needs none.
	b, err := blobtier.Open(context.Background(), "gs://some-bucket?anonymous=true", blobtier.Options{})
	if err != nil {
		t.Fatalf("anonymous open: %v", err)
	}
	b.Close()
}
