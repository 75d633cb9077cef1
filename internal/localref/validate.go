package localref

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bucketlog/bucketlog/localseg"
)

// validateID applies the identifier rule of SPEC §2 and returns the trimmed
// identifier: 1–256 bytes of [A-Za-z0-9_-] after trimming.
func validateID(what, raw string) (string, error) {
	id := strings.TrimSpace(raw)
	if id == "" {
		return "", fmt.Errorf("%w: %s is empty", localseg.ErrInvalidInput, what)
	}
	if len(id) > localseg.MaxIDLen {
		return "", fmt.Errorf("%w: %s is %d bytes, more than %d", localseg.ErrInvalidInput, what, len(id), localseg.MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", fmt.Errorf("%w: %s %q has a character outside [A-Za-z0-9_-] at byte %d", localseg.ErrInvalidInput, what, id, i)
		}
	}
	return id, nil
}

// validateEvent checks one event and returns it with its execution id
// trimmed, as it will be stored.
func validateEvent(ev localseg.Event) (localseg.Event, error) {
	id, err := validateID("execution id", ev.ExecutionID)
	if err != nil {
		return ev, err
	}
	ev.ExecutionID = id
	if strings.TrimSpace(ev.TransactionID) == "" {
		return ev, fmt.Errorf("%w: transaction id is blank", localseg.ErrInvalidInput)
	}
	if len(ev.TransactionID) > localseg.MaxTransactionIDLen {
		return ev, fmt.Errorf("%w: transaction id is %d bytes, more than %d", localseg.ErrInvalidInput, len(ev.TransactionID), localseg.MaxTransactionIDLen)
	}
	if !utf8.ValidString(ev.TransactionID) {
		return ev, fmt.Errorf("%w: transaction id is not valid UTF-8", localseg.ErrInvalidInput)
	}
	if !utf8.ValidString(ev.Payload) {
		return ev, fmt.Errorf("%w: payload is not valid UTF-8", localseg.ErrInvalidInput)
	}
	return ev, nil
}

// checkLimit refuses a negative page size. A limit of 0 is allowed: the
// page then carries the counts and no records.
func checkLimit(limit int) error {
	if limit < 0 {
		return fmt.Errorf("%w: negative limit %d", localseg.ErrInvalidInput, limit)
	}
	return nil
}
