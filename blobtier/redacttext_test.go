package blobtier_test

import (
	"strings"
	"testing"

	"github.com/bucketlog/bucketlog/blobtier"
)

// TestRedactText: every URL quoted inside an error message loses its
// secrets; the text around it is kept.
func TestRedactText(t *testing.T) {
	for _, tc := range []struct{ in, secret, keep string }{
		{`Put "http://user:PASS1@127.0.0.1:9/b/k": dial tcp: refused`, "PASS1", `Put "http://REDACTED@127.0.0.1:9/b/k": dial tcp: refused`},
		{`get s3://b/k?endpoint=http%3A%2F%2Fu%3APASS2%40h: 503`, "PASS2", "get s3://b/k?endpoint="},
		{`list gs://b?token=PASS3 failed`, "PASS3", " failed"},
		{`no url here`, "", "no url here"},
	} {
		got := blobtier.RedactText(tc.in)
		if tc.secret != "" && strings.Contains(got, tc.secret) {
			t.Errorf("RedactText(%q) = %q: the secret is still there", tc.in, got)
		}
		if !strings.Contains(got, tc.keep) {
			t.Errorf("RedactText(%q) = %q: want it to keep %q", tc.in, got, tc.keep)
		}
	}
}
