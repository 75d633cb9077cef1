package drives

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bucketlog/bucketlog/localseg"
)

// ErrUsage is the class of a drive that refuses its input (an empty or
// non-empty root, too few shards, an empty event set, a bad consumer name).
// The CLI maps it to the usage class (exit 2).
var ErrUsage = errors.New("drives: refused")

// usagef returns an ErrUsage with a message.
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// prepareRoot refuses an empty root and a root that already holds anything,
// so a drive never mixes its deterministic events with real data, then
// creates it.
func prepareRoot(root string) error {
	if strings.TrimSpace(root) == "" {
		return usagef("the root directory is empty; give a fresh directory")
	}
	f, err := os.Open(root)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(root, 0o755); err != nil {
			return fmt.Errorf("drives: create root: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("drives: open root: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("drives: read root: %w", err)
	}
	if len(names) > 0 {
		return usagef("root %s is not empty (it holds %q); a drive runs only on a fresh directory so it never mixes with real data", root, names[0])
	}
	return nil
}

// Record is one event as the JSON outputs show it (cmd/bucketlog/doc.go).
type Record struct {
	GlobalSequence uint64 `json:"global_sequence"`
	ExecutionID    string `json:"execution_id"`
	TransactionID  string `json:"transaction_id"`
	ByteLen        int    `json:"byte_len"`
	Payload        string `json:"payload"`
}

// records converts stored records; the result is never nil, so it
// marshals as [] rather than null.
func records(rs []localseg.Record) []Record {
	out := make([]Record, 0, len(rs))
	for _, r := range rs {
		out = append(out, Record{GlobalSequence: r.Seq, ExecutionID: r.ExecutionID, TransactionID: r.TransactionID, ByteLen: len(r.Payload), Payload: r.Payload})
	}
	return out
}

// checks collects the first divergence a drive observes.
type checks struct{ first *string }

// fail records a divergence (only the first is kept) and returns false so
// that callers can write ok = c.fail(...).
func (c *checks) fail(format string, args ...any) bool {
	if c.first == nil {
		s := fmt.Sprintf(format, args...)
		c.first = &s
	}
	return false
}
