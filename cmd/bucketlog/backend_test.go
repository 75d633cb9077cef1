package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackendReadsCreateNothing: on either backend, scan, read and tail of
// a shard that was never written answer "exists":false, ack and
// consumer-delete answer an unknown consumer (exit 3), and none of them
// creates the shard's directory or the local_reference file.
func TestBackendReadsCreateNothing(t *testing.T) {
	for _, env := range [][]string{nil, {"NOETL_EHDB_EVENTLOG_BACKEND=local_reference"}} {
		dir := t.TempDir()
		for _, args := range [][]string{{"scan"}, {"read", "--execution-id", "1"}, {"tail", "--consumer", "c"}} {
			r := ok(t, env, append([]string{args[0], "--dir", dir}, args[1:]...)...)
			if !strings.Contains(r.stdout, `"exists":false`) {
				t.Errorf("%v %s: %s", env, args[0], r.stdout)
			}
		}
		runCLI(t, env, "ack", "--dir", dir, "--consumer", "c", "--sequence", "1").want(t, 3, "invalid_state")
		runCLI(t, env, "consumer-delete", "--dir", dir, "--consumer", "c").want(t, 3, "invalid_state")
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Errorf("%v: the commands created %v under %s", env, names, dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "shard-0000", localrefFile)); err == nil {
			t.Errorf("%v: a read created the local_reference file", env)
		}
	}
}
