package main

import "testing"

// TestBackendTokenExact: only the exact token selects the non-durable
// local_reference driver (the README's Configuration table; issue 12, finding 13); the token with
// blanks around it keeps durable_segment and warns.
func TestBackendTokenExact(t *testing.T) {
	for raw, want := range map[string]string{
		"local_reference":   BackendLocalReference,
		"local_reference ":  BackendDurableSegment,
		" local_reference":  BackendDurableSegment,
		"local_reference\n": BackendDurableSegment,
		"durable_segment":   BackendDurableSegment,
	} {
		c, err := ConfigFromEnv(func(k string) string {
			if k == EnvBackend {
				return raw
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.Backend != want {
			t.Errorf("%q: backend %s, want %s", raw, c.Backend, want)
		}
		if want == BackendDurableSegment && raw != "durable_segment" && len(c.Warnings) == 0 {
			t.Errorf("%q: no warning", raw)
		}
	}
}
