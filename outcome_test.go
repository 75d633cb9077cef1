package bucketlog

import (
	"testing"

	"github.com/bucketlog/bucketlog/metrics"
)

// TestOutcomeOfEveryClass pins the ops-counter outcome of each class token:
// metrics.OutcomeOfClass spells the tokens again, so a token renamed here
// and not there would count as storage.
func TestOutcomeOfEveryClass(t *testing.T) {
	want := map[string]metrics.Outcome{
		ClassOK: metrics.OutcomeOK, ClassNotInBucket: metrics.OutcomeOK,
		ClassInvalidInput: metrics.OutcomeInvalidInput, ClassUsage: metrics.OutcomeInvalidInput,
		ClassInvalidState: metrics.OutcomeInvalidState, ClassNotOwner: metrics.OutcomeNotOwner,
		ClassStorage: metrics.OutcomeStorage, ClassFenced: metrics.OutcomeStorage, ClassInvariant: metrics.OutcomeStorage,
	}
	for class, out := range want {
		if got := metrics.OutcomeOfClass(class); got != out {
			t.Errorf("class %q: outcome %d, want %d", class, got, out)
		}
	}
}
