package blobtier

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // registers file://
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/memblob"  // registers mem://; named mem buckets below
	_ "gocloud.dev/blob/s3blob" // registers s3://
	"gocloud.dev/gcp"

	"github.com/bucketlog/bucketlog/blobtier/internal/blobdriver"
)

// Query parameters of s3:// URLs that blobtier fills in when the URL names
// an endpoint (an S3-compatible server) and leaves them unset. Since
// aws-sdk-go-v2's 2025 default of "when_supported", uploads carry CRC
// checksum trailers that many S3-compatible servers refuse or mis-store;
// "when_required" sends what those servers expect. These are the spellings
// gocloud.dev/aws.V2ConfigFromURLParams reads.
const (
	paramRequestChecksum  = "request_checksum_calculation"
	paramResponseChecksum = "response_checksum_validation"
	checksumWhenRequired  = "when_required"
)

// OpenError is the error of Open: URL is the URL with its secrets redacted,
// and the message never repeats a secret the URL carried. Err is the cause
// as the opener returned it (its own message may quote the URL verbatim, so
// print the OpenError, not Err).
type OpenError struct {
	URL string
	Err error
	msg string
}

func (e *OpenError) Error() string {
	return "blobtier: open bucket " + e.URL + ": " + e.msg
}

func (e *OpenError) Unwrap() error { return e.Err }

func openError(raw string, err error) *OpenError {
	msg := err.Error()
	for _, s := range secretsOf(raw) {
		msg = strings.ReplaceAll(msg, s, redacted)
	}
	return &OpenError{URL: Redact(raw), Err: err, msg: msg}
}

// Open opens a bucket URL through gocloud's URL openers and wraps it with
// New. Supported schemes:
//
//   - s3://BUCKET?region=R[&endpoint=http://HOST:PORT&use_path_style=true]:
//     credentials come from the AWS default chain (environment, shared
//     files, instance roles); anonymous=true sends unsigned requests. With
//     endpoint set, request_checksum_calculation and
//     response_checksum_validation default to when_required.
//   - gs://BUCKET: Application Default Credentials (missing ones are an
//     error at Open); anonymous=true needs none; with
//     STORAGE_EMULATOR_HOST=HOST:PORT in the environment (no scheme), the
//     client talks plain HTTP to that emulator without credentials.
//   - mem:// is a new empty in-memory bucket per Open; mem://NAME is an
//     in-memory bucket shared by every Open of that name in this process
//     (so a test can reopen it, as a restarted process reopens S3).
//   - file:///DIR is for development only: gocloud's fileblob is not atomic
//     for create-if-absent (two racing writers can both "win") and never
//     fsyncs, so neither write-once nor durability holds on it.
//
// Every scheme accepts prefix=P (all keys live under P; gocloud's
// PrefixedBucket). Open does not contact the bucket: an unreachable or
// missing bucket shows on the first request. A URL that cannot be opened is
// an *OpenError naming the URL with its secrets redacted.
func Open(ctx context.Context, rawURL string, opts Options) (Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &OpenError{URL: Redact(rawURL), Err: err, msg: "not a URL"}
	}
	q := u.Query()
	if q.Has("key") {
		return nil, openError(rawURL, fmt.Errorf("the key= parameter (a single-key bucket) is not supported: blobtier needs the whole bucket"))
	}
	switch u.Scheme {
	case "s3":
		if q.Get("endpoint") != "" {
			for _, p := range []string{paramRequestChecksum, paramResponseChecksum} {
				if !q.Has(p) {
					q.Set(p, checksumWhenRequired)
				}
			}
			u.RawQuery = q.Encode()
		}
	case "mem":
		if u.Host != "" || u.Path != "" {
			return openNamedMem(rawURL, u, opts)
		}
	case "gs", "file":
	case "":
		return nil, openError(rawURL, fmt.Errorf("no scheme (want s3://, gs://, mem:// or file://)"))
	default:
		return nil, openError(rawURL, fmt.Errorf("unsupported scheme %q (want s3://, gs://, mem:// or file://)", u.Scheme))
	}
	mux := blob.DefaultURLMux()
	if u.Scheme == "gs" {
		if mux, err = gcsMux(ctx, q); err != nil {
			return nil, openError(rawURL, err)
		}
	}
	b, err := mux.OpenBucketURL(ctx, u)
	if err != nil {
		return nil, openError(rawURL, err)
	}
	return New(b, opts), nil
}

// gcsMux returns a URL mux whose gs:// opener has the credentials the URL
// needs. gocloud's default gs:// opener prints a warning on stdout and goes
// on without credentials when Application Default Credentials are missing;
// here that is a clear error at Open instead (a CLI's stdout carries JSON).
// No credentials are looked up for an emulator (STORAGE_EMULATOR_HOST set:
// gcsblob then talks plain HTTP to it without authentication) or for
// anonymous=true / access_id=- URLs.
func gcsMux(ctx context.Context, q url.Values) (*blob.URLMux, error) {
	opener := &gcsblob.URLOpener{}
	anonymous := q.Get("access_id") == "-"
	if a, err := strconv.ParseBool(q.Get("anonymous")); err == nil && a {
		anonymous = true
	}
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" || anonymous {
		opener.Client = gcp.NewAnonymousHTTPClient(gcp.DefaultTransport())
	} else {
		creds, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("no Google Application Default Credentials (set GOOGLE_APPLICATION_CREDENTIALS, or STORAGE_EMULATOR_HOST for an emulator): %w", err)
		}
		if opener.Client, err = gcp.NewHTTPClient(gcp.DefaultTransport(), creds.TokenSource); err != nil {
			return nil, err
		}
		opener.TokenSource = gcp.CredentialsTokenSource(creds)
	}
	mux := new(blob.URLMux)
	mux.RegisterBucket(gcsblob.Scheme, opener)
	return mux, nil
}

// named mem:// buckets live as long as the process.
var (
	memMu    sync.Mutex
	memNamed = map[string]*blob.Bucket{}
)

func openNamedMem(raw string, u *url.URL, opts Options) (Bucket, error) {
	q := u.Query()
	for p := range q {
		if p != "prefix" {
			return nil, openError(raw, fmt.Errorf("unknown query parameter %q for mem://NAME (only prefix=)", p))
		}
	}
	name := u.Host + u.Path
	memMu.Lock()
	base, ok := memNamed[name]
	if !ok {
		base = memblob.OpenBucket(nil)
		memNamed[name] = base
	}
	memMu.Unlock()
	// Each Open gets its own view of the shared bucket; closing the view
	// leaves the shared bucket open.
	view := blob.NewBucket(blobdriver.New(base, true))
	if p := q.Get("prefix"); p != "" {
		view = blob.PrefixedBucket(view, p)
	}
	return newBucket(view, opts, view.Close), nil
}

const redacted = "REDACTED"

// sensitiveParam reports whether a query parameter may carry a secret.
func sensitiveParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"secret", "token", "password", "passwd", "credential", "signature", "session", "auth", "key"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return n == "sig" || n == "x-amz-security-token"
}

// Redact returns rawURL without secrets, for logs, errors and bucket.json:
// userinfo becomes REDACTED and so does the value of every query parameter
// whose name suggests a secret (key, secret, token, password, credential,
// signature, session, auth). Parameters are split on & and on ; (a
// ";token=" is a parameter of its own), and a parameter's value is redacted
// the same way, percent-decoded first, when it is itself a URL or a query
// (an endpoint=http://user:PASS@host, or one whose own query carries a
// token): userinfo anywhere and sensitive parameters at any depth. Parameters keep their
// order. A string that is not a URL is replaced whole, since it cannot be
// inspected.
func Redact(rawURL string) string {
	out, _ := redactURL(rawURL, 0, nil)
	return out
}

// maxRedactDepth bounds the nesting of URLs inside parameter values.
const maxRedactDepth = 4

// redactURL redacts one URL (see Redact), appending each secret it removes
// to *found (when found is not nil). changed is false when nothing was
// removed: the URL is then returned as given (url.URL.String does not
// round-trip every spelling: mem:// would become mem:).
func redactURL(raw string, depth int, found *[]string) (out string, changed bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable URL (redacted)>", true
	}
	if u.User != nil {
		if found != nil {
			*found = append(*found, u.User.Username())
			if p, ok := u.User.Password(); ok {
				*found = append(*found, p)
			}
		}
		u.User = url.User(redacted)
		changed = true
	}
	if u.RawQuery != "" {
		if q, c := redactQuery(u.RawQuery, depth, found); c {
			u.RawQuery, changed = q, true
		}
	}
	if !changed {
		return raw, false
	}
	return u.String(), true
}

// redactQuery redacts a raw query string, split on & and ;.
func redactQuery(raw string, depth int, found *[]string) (string, bool) {
	changed := false
	var b strings.Builder
	start := 0
	for i := 0; i <= len(raw); i++ {
		if i < len(raw) && raw[i] != '&' && raw[i] != ';' {
			continue
		}
		part, c := redactParam(raw[start:i], depth, found)
		changed = changed || c
		b.WriteString(part)
		if i < len(raw) {
			b.WriteByte(raw[i])
		}
		start = i + 1
	}
	return b.String(), changed
}

// redactParam redacts one name=value pair.
func redactParam(p string, depth int, found *[]string) (string, bool) {
	k, v, hasValue := strings.Cut(p, "=")
	if !hasValue {
		return p, false
	}
	name, err := url.QueryUnescape(k)
	if err != nil {
		name = k
	}
	val, verr := url.QueryUnescape(v)
	if sensitiveParam(name) {
		if found != nil {
			*found = append(*found, v)
			if verr == nil {
				*found = append(*found, val)
			}
		}
		return k + "=" + redacted, true
	}
	if verr != nil {
		// Not decodable, so not inspectable: it may hide anything.
		if strings.Contains(v, "%") {
			if found != nil {
				*found = append(*found, v)
			}
			return k + "=" + redacted, true
		}
		val = v
	}
	// A value encoded more than once is decoded to the end.
	for range maxRedactDepth {
		d, err := url.QueryUnescape(val)
		if err != nil || d == val {
			break
		}
		val = d
	}
	if depth >= maxRedactDepth || !strings.ContainsAny(val, "@=") {
		return p, false
	}
	var inner string
	var c bool
	if strings.Contains(val, "://") {
		inner, c = redactURL(val, depth+1, found)
	} else {
		inner, c = redactQuery(val, depth+1, found)
	}
	if !c {
		return p, false
	}
	return k + "=" + url.QueryEscape(inner), true
}

// secretsOf lists the secret strings of rawURL in every spelling an error
// message might quote them in.
func secretsOf(rawURL string) []string {
	var found []string
	redactURL(rawURL, 0, &found)
	var out []string
	for _, s := range found {
		if len(s) >= 3 {
			out = append(out, s)
			if e := url.QueryEscape(s); e != s {
				out = append(out, e)
			}
			if e := url.PathEscape(s); e != s {
				out = append(out, e)
			}
		}
	}
	return out
}
