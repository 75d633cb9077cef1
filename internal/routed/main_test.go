package routed

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines, but the stores it opens may; none may
// outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
