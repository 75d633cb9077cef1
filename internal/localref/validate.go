package localref

import (
	"fmt"

	"github.com/bucketlog/bucketlog/localseg"
)

// validateEvent checks one event with the durable store's own rules and
// returns it with its execution id trimmed, as it will be stored. The size
// limit is checked by the caller, which knows its cap.
func validateEvent(ev localseg.Event) (localseg.Event, error) { return localseg.ValidateEvent(ev, 0) }

// validateID is the store's identifier rule.
func validateID(what, raw string) (string, error) { return localseg.ValidateName(what, raw) }

// checkLimit refuses a negative page size. A limit of 0 is allowed: the
// page then carries the counts and no records.
func checkLimit(limit int) error {
	if limit < 0 {
		return fmt.Errorf("%w: negative limit %d", localseg.ErrInvalidInput, limit)
	}
	return nil
}
