package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// envDebugCPUProfile names a file serve writes a CPU profile of its whole
// run to (from the start until an orderly stop: SIGTERM, SIGINT, SIGHUP). It
// is a debugging aid for the bench (bench/cmd/serveprof), not a setting, so
// it is not in the documented environment.
const envDebugCPUProfile = "BUCKETLOG_DEBUG_CPUPROFILE"

// startCPUProfile starts the CPU profile envDebugCPUProfile asks for and
// returns the function that stops it (a no-op when it is not set).
func (c *cli) startCPUProfile() (stop func(), err error) {
	path := c.getenv(envDebugCPUProfile)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envDebugCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", envDebugCPUProfile, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
