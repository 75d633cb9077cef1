// Package sections holds the measurements of the bench. Each file registers
// one section with harness.Register from its init function; importing the
// package (for its side effects) makes them available to the command.
//
// To add a section: write a file here with an init that calls
// harness.Register(harness.Section{Name, Doc, Default, Run}); Run returns
// rows built with harness.Measured (repetitions, median taken) or
// harness.Ratio (from two rows of the same run), and harness.Failed for a
// measurement that could not be taken. Work that must not pollute the
// parent's memory numbers runs in a child process (harness.RegisterChild and
// Env.RunChild). Stores reused across sections come from Env.Fixtures.
package sections

import (
	"fmt"
	"os"
)

// tempDir makes a fresh directory for one repetition under the run's work
// directory; the caller removes it.
func tempDir(root, pattern string) (string, error) {
	return os.MkdirTemp(root, pattern)
}

// countLabel prints an event count the way the rows name it: 1k, 100k, 1M.
func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	default:
		return fmt.Sprint(n)
	}
}

// sizeLabel prints a payload size: 256B, 4KiB.
func sizeLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}
