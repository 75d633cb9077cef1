package emulator

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
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

// The emulators' round trips are tested through their public face, in
// bucketlogtest.

// A hung server holds a request until its deadline; the Blackhole is that
// server.
func TestBlackholeHoldsRequestsUntilTheDeadline(t *testing.T) {
	h, err := StartBlackhole()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	s3, err := OpenS3Bucket(context.Background(), h.Endpoint(), "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	gcs, err := OpenGCSBucket(context.Background(), h.Endpoint(), "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gcs.Close()
	for name, b := range map[string]interface {
		ReadAll(context.Context, string) ([]byte, error)
	}{"s3": s3, "gcs": gcs} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if _, err := b.ReadAll(ctx, "k"); err == nil || ctx.Err() == nil {
			t.Errorf("%s: read from a blackhole = %v before the deadline", name, err)
		}
		cancel()
	}
}
