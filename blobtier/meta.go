package blobtier

import (
	"errors"
	"fmt"
	"strconv"
)

// User metadata keys of every object. They are lower-case because some
// services lower-case metadata keys on the way back (EMULATORS.md). Part of
// the bucket format; do not change.
const (
	MetaLength = "length" // decimal byte length
	MetaXXH64  = "xxh64"  // 16 lowercase hex digits, XXH64 seed 0 of the whole object
	MetaEpoch  = "epoch"  // 16 lowercase hex digits; absent reads as 0
)

// MetaOf returns the metadata an object holding data carries.
func MetaOf(data []byte, epoch uint64) Meta {
	return Meta{Length: int64(len(data)), XXH64: Digest(data), Epoch: epoch}
}

// Encode returns m as user metadata.
func (m Meta) Encode() map[string]string {
	return map[string]string{
		MetaLength: strconv.FormatInt(m.Length, 10),
		MetaXXH64:  fmt.Sprintf("%016x", m.XXH64),
		MetaEpoch:  fmt.Sprintf("%016x", m.Epoch),
	}
}

// DecodeMeta parses user metadata. A missing or malformed `length` or
// `xxh64`, or a malformed `epoch`, is an error wrapping ErrCorrupt: an object
// without trustworthy metadata cannot be verified, so it is never trusted.
func DecodeMeta(md map[string]string) (Meta, error) {
	var m Meta
	var errs []error
	if s, ok := md[MetaLength]; !ok {
		errs = append(errs, errors.New("no length metadata"))
	} else if n, err := parseDecimal(s); err != nil {
		errs = append(errs, fmt.Errorf("length metadata %q: %w", s, err))
	} else {
		m.Length = n
	}
	if s, ok := md[MetaXXH64]; !ok {
		errs = append(errs, errors.New("no xxh64 metadata"))
	} else if v, err := parseHex(s, 16); err != nil {
		errs = append(errs, fmt.Errorf("xxh64 metadata: %w", err))
	} else {
		m.XXH64 = v
	}
	if s, ok := md[MetaEpoch]; ok {
		if v, err := parseHex(s, 16); err != nil {
			errs = append(errs, fmt.Errorf("epoch metadata: %w", err))
		} else {
			m.Epoch = v
		}
	}
	if len(errs) > 0 {
		return Meta{}, fmt.Errorf("%w: %w", ErrCorrupt, errors.Join(errs...))
	}
	return m, nil
}

// parseDecimal accepts plain decimal digits only (no sign, no spaces, no
// leading zero), so a length has one spelling.
func parseDecimal(s string) (int64, error) {
	if s == "" || len(s) > 19 {
		return 0, errors.New("not a decimal length")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a decimal length")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero in a decimal length")
	}
	return strconv.ParseInt(s, 10, 64)
}

// verify checks data against m.
func verify(data []byte, m Meta) error {
	switch n := int64(len(data)); {
	case n < m.Length:
		return fmt.Errorf("%w: short object: %d bytes, metadata length %d", ErrCorrupt, n, m.Length)
	case n > m.Length:
		return fmt.Errorf("%w: long object: more than the metadata length %d", ErrCorrupt, m.Length)
	}
	if d := Digest(data); d != m.XXH64 {
		return fmt.Errorf("%w: xxh64 %016x, metadata says %016x", ErrCorrupt, d, m.XXH64)
	}
	return nil
}
