package localref

import (
	"fmt"
	"os"
	"strings"
)

// EnvBackend selects the storage engine (README.md, Configuration).
const EnvBackend = "NOETL_EHDB_EVENTLOG_BACKEND"

// Backend names a storage engine.
type Backend string

const (
	// DurableSegment is the durable segment store (localseg), the default
	// and the authoritative store.
	DurableSegment Backend = "durable_segment"
	// LocalReference is this package's JSONL driver. It is not production
	// durable and exists for parity tests and migration.
	LocalReference Backend = "local_reference"
)

// ParseBackend resolves the raw value of NOETL_EHDB_EVENTLOG_BACKEND (or a
// flag). It is fail-safe: the value is trimmed of surrounding whitespace and
// then compared exactly (case-sensitive); only "local_reference" selects
// the reference driver and only "durable_segment" selects the default
// without comment. Anything else — unset, empty, a different spelling, a
// typo — keeps DurableSegment and returns a warning to log, so that a
// mistyped value can never move the authoritative store onto a driver that
// is not durable.
func ParseBackend(raw string) (b Backend, warning string) {
	switch v := strings.TrimSpace(raw); v {
	case string(DurableSegment):
		return DurableSegment, ""
	case string(LocalReference):
		return LocalReference, ""
	case "":
		return DurableSegment, fmt.Sprintf("%s is unset or empty; using %s", EnvBackend, DurableSegment)
	default:
		return DurableSegment, fmt.Sprintf("%s=%q is not a known backend (%s or %s); keeping %s", EnvBackend, raw, DurableSegment, LocalReference, DurableSegment)
	}
}

// BackendFromEnv resolves EnvBackend from the environment.
func BackendFromEnv() (Backend, string) { return ParseBackend(os.Getenv(EnvBackend)) }
