package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// serve refuses a local retention budget without a bucket, or a budget that
// is not positive, as a usage error (exit 2) before it opens anything.
func TestServeLocalRetentionUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--local-retention-bytes", "1048576"}},
		{args: []string{"--local-retention-bytes", "0", "--bucket", "mem://"}},
		{env: map[string]string{EnvLocalRetentionBytes: "1048576"}},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0"}, tc.args...)
		code := run(context.Background(), args, strings.NewReader(""), &out, &errb, func(k string) string { return tc.env[k] })
		if code != 2 || !strings.Contains(errb.String()+out.String(), "local-retention-bytes") {
			t.Fatalf("serve %v (env %v): exit %d, stderr %s", tc.args, tc.env, code, errb.String())
		}
	}
}
