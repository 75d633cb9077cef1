package drives

import (
	"testing"

	"go.uber.org/goleak"
)

// The drives start no goroutines of their own, but the stores they open
// may; none may outlive a drive. The shared drive's tests also talk to an
// in-process S3 emulator, whose idle client connections and gocloud's
// OpenCensus worker are not ours and end with the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
