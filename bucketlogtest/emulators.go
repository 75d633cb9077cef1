package bucketlogtest

import (
	"testing"

	"github.com/bucketlog/bucketlog/internal/emulator"
)

// S3 is gofakes3 over its in-memory backend on 127.0.0.1. Its methods:
// Endpoint, URL and URLSigned (a bucket's URL, anonymous or signed), Env
// (none), CreateBucket, NewBucket, OpenBucket (a *blob.Bucket), Bucket (a
// blobtier.Bucket), PutRaw and Close; see the package documentation.
type S3 = emulator.S3

// GCS is fake-gcs-server over its in-memory backend on 127.0.0.1. Its
// methods: Endpoint, Host (STORAGE_EMULATOR_HOST's value), URL (gs://NAME),
// Env, CreateBucket, NewBucket, OpenBucket, Bucket, PutRaw and Close.
type GCS = emulator.GCS

const (
	// Region is the region of every S3 emulator URL and client.
	Region = emulator.Region
	// EnvGCSHost is STORAGE_EMULATOR_HOST, the variable a gs:// URL needs.
	EnvGCSHost = emulator.EnvGCSHost
)

// StartS3 starts an S3 emulator; the caller closes it.
func StartS3() (*S3, error) { return emulator.StartS3() }

// StartGCS starts a GCS emulator; the caller closes it.
func StartGCS() (*GCS, error) { return emulator.StartGCS() }

// S3Env is the environment S3.URLSigned needs: static credentials, and no
// shared config, credentials file or instance metadata lookup.
func S3Env() map[string]string { return emulator.S3Env() }

// NewS3 starts an S3 emulator that t.Cleanup closes; a failure to start
// fails t.
func NewS3(t testing.TB) *S3 {
	t.Helper()
	s, err := emulator.StartS3()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// NewGCS starts a GCS emulator that t.Cleanup closes; a failure to start
// fails t.
func NewGCS(t testing.TB) *GCS {
	t.Helper()
	g, err := emulator.StartGCS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
