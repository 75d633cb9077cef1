package fencing

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// EpochField is the field the mutable objects (the reclaim watermark `rw`
// and the cursor object `cur`) carry for writer fencing: the epoch of the
// writer that last wrote them. A writer rewrites them only while the stored
// epoch is at most its own.
const EpochField = "epoch"

// StoredEpoch returns the epoch field of a mutable object's JSON body (0
// when absent: written before fencing).
func StoredEpoch(body []byte) (uint64, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	raw, ok := fields[EpochField]
	if !ok {
		return 0, nil
	}
	e, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: epoch field %s", ErrBadRecord, raw)
	}
	return e, nil
}

// WithEpoch returns body (one JSON object) with its epoch field set to
// epoch, every other field kept as it is.
func WithEpoch(body []byte, epoch uint64) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrBadRecord, err)
	}
	fields[EpochField] = json.RawMessage(strconv.FormatUint(epoch, 10))
	return json.Marshal(fields)
}
