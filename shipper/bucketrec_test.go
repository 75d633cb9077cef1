package shipper

import "testing"

func TestSameBucket(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"s3://b?region=eu-west-1", "s3://b?region=eu-west-1", true},
		{"s3://b?region=eu-west-1&prefix=p/", "s3://b?prefix=p/&region=eu-west-1", true},
		{"s3://b?endpoint=http://h:9000&use_path_style=true&region=us-east-1", "s3://b?region=us-east-1&use_path_style=true&endpoint=http%3A%2F%2FH%3A9000%2F", true},
		{"s3://REDACTED@b?secret_access_key=REDACTED&prefix=p/", "s3://k:s3cr3t@b?prefix=p/&secret_access_key=s3cr3t", true},
		{"s3://b?region=eu-west-1", "s3://b?region=us-east-1", true}, // how it is reached, not which
		{"s3://b", "s3://c", false},
		{"s3://b?prefix=p/", "s3://b?prefix=q/", false},
		{"s3://b?prefix=p/", "s3://b", false},
		{"s3://b?endpoint=http://h:9000", "s3://b?endpoint=http://g:9000", true}, // reached another way
		{"s3://b", "gs://b", false},
		{"mem://x", "mem://y", false},
		{"file:///d/a/", "file:///d/a", true},
		{"file:///d/a", "file:///d/b", false},
		{"injected://bucket", "s3://b", true},
		{"s3://b", "injected://bucket", true},
		{"(unreadable bucket.json)", "s3://b", false},
	} {
		if got := SameBucket(c.a, c.b); got != c.same {
			t.Errorf("SameBucket(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
