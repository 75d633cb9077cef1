package drives

import (
	"testing"

	"go.uber.org/goleak"
)

// The drives start no goroutines of their own, but the stores they open
// may; none may outlive a drive.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
