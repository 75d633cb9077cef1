package localref

import (
	"strings"
	"testing"
)

// TestParseBackendFailSafe: unset, empty and unknown values keep
// durable_segment with a warning; only the exact token selects
// local_reference (CHECKLIST §1.12).
func TestParseBackendFailSafe(t *testing.T) {
	cases := []struct {
		raw     string
		want    Backend
		warning bool
	}{
		{"", DurableSegment, true},
		{"   ", DurableSegment, true},
		{"durable_segment", DurableSegment, false},
		{" durable_segment\n", DurableSegment, false},
		{"local_reference", LocalReference, false},
		{"\tlocal_reference ", LocalReference, false},
		{"LOCAL_REFERENCE", DurableSegment, true},
		{"Local_Reference", DurableSegment, true},
		{"local-reference", DurableSegment, true},
		{"localreference", DurableSegment, true},
		{"local_reference_x", DurableSegment, true},
		{"local", DurableSegment, true},
		{"jsonl", DurableSegment, true},
		{"off", DurableSegment, true},
		{"local_reference,durable_segment", DurableSegment, true},
		{"\"local_reference\"", DurableSegment, true},
	}
	for _, c := range cases {
		got, warn := ParseBackend(c.raw)
		if got != c.want {
			t.Errorf("ParseBackend(%q) = %q, want %q", c.raw, got, c.want)
		}
		if (warn != "") != c.warning {
			t.Errorf("ParseBackend(%q) warning = %q, want warning: %v", c.raw, warn, c.warning)
		}
		if warn != "" && !strings.Contains(warn, string(DurableSegment)) {
			t.Errorf("warning %q does not name the backend kept", warn)
		}
	}
}

func TestBackendFromEnv(t *testing.T) {
	t.Setenv(EnvBackend, "local_reference")
	if b, w := BackendFromEnv(); b != LocalReference || w != "" {
		t.Fatalf("BackendFromEnv = %q, %q", b, w)
	}
	t.Setenv(EnvBackend, "durable")
	if b, w := BackendFromEnv(); b != DurableSegment || w == "" {
		t.Fatalf("BackendFromEnv(durable) = %q, %q", b, w)
	}
}
