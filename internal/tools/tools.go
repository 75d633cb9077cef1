//go:build tools

// This file pins the chosen dependencies in go.mod before every package
// that uses them exists. It is never built.
package tools

import (
	_ "cloud.google.com/go/storage"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/fsouza/fake-gcs-server/fakestorage"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/johannesboyne/gofakes3/backend/s3mem"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "go.uber.org/goleak"
	_ "gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
	_ "gocloud.dev/gcerrors"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
)
