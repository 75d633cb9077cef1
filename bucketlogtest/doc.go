// Package bucketlogtest starts in-process S3 and GCS emulators and opens a
// bucketlog.Log on them, so a test of a service built on bucketlog runs
// against a real object-store protocol in a few lines, with no cloud
// account, no Docker and no setup. It is to bucketlog what
// net/http/httptest is to net/http:
//
//	func TestOrders(t *testing.T) {
//		s3 := bucketlogtest.NewS3(t)                            // closed by t.Cleanup
//		l := bucketlogtest.OpenLog(t, s3, bucketlog.Options{}) // a fresh bucket, a temp dir
//		// … use l as the service would …
//	}
//
// # Contract
//
// For tests and demonstrations only: the emulators are gofakes3 (S3) and
// fake-gcs-server (GCS) over their in-memory backends. They speak the wire
// protocol well enough for bucketlog's use (conditional writes and
// compare-and-swap included), but they are not S3 or GCS: see the caveats
// below, and never point a production log at them.
//
// Loopback only: each emulator listens on one fresh port of 127.0.0.1 (never
// another interface), speaks plain HTTP, needs no credentials and logs
// nothing.
//
// Bounded: an emulator is one listener, one serving goroutine plus one per
// open connection, and memory for the objects written to it; nothing goes
// to disk. Every HTTP request has a header deadline.
//
// Close stops the listener, drops every connection at once (there is
// nothing left to finish), waits for the serving goroutine, forgets every
// bucket and object, and closes the idle connections of the buckets it
// opened. A bucketlog.Log still open on an emulator after Close fails its
// bucket requests (its own Close then spends up to
// Options.ShutdownShipTimeout trying to ship): close logs first. NewS3,
// NewGCS and OpenLog register their cleanups with t.Cleanup, which runs
// them last-registered first, so a log opened by OpenLog closes before its
// emulator.
//
// # Bucket URLs and their environment
//
// S3.URL is s3://NAME?endpoint=http://127.0.0.1:PORT&use_path_style=true&region=us-east-1&anonymous=true:
// unsigned requests, so bucketlog.Open (Options.BucketURL) or blobtier.Open
// opens it with no environment at all. S3.URLSigned drops anonymous=true,
// as a production URL would: its requests are signed with credentials from
// the environment, which S3Env lists (static keys, and no shared config,
// credentials file or instance metadata lookup, so nothing on the machine
// is consulted).
//
// GCS.URL is gs://NAME. gcsblob reaches an emulator only through the
// process-wide variable STORAGE_EMULATOR_HOST=127.0.0.1:PORT (GCS.Env;
// host:port, no scheme). The emulator is started with its public host set
// to 127.0.0.1, without which writes work and every read is NotFound.
// Because the variable is process-wide, a test that opens a gs:// URL sets
// it with t.Setenv and cannot run in parallel; S3 URLs, and every Bucket or
// OpenBucket (which read no environment), can.
//
// # Caveats of the emulators
//
// gofakes3 does not enforce conditions on multipart uploads, which s3blob
// uses from 16 MiB: keep conditional objects below that (bucketlog's
// segments are at most 15 MiB). With an S3 ETag being the content's MD5,
// rewriting identical bytes keeps the version. User metadata keys come back
// lower-cased. Neither emulator lists correctly with a delimiter and small
// pages.
//
// The emulators live in internal/emulator (S3 and GCS here are its types),
// a leaf below the engine that the engine's own in-package tests use too;
// that is where bucket openers on any endpoint and a blackhole
// listener for deadline tests stay, as the module's internal test support.
//
// Every type here is safe for concurrent use.
package bucketlogtest
