package blobtier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// RangeGetter is the part of a Bucket that reads part of an object (every
// Bucket has it; a reader narrower than a Bucket may not).
type RangeGetter interface {
	// GetRange returns the n bytes of key from offset off, or fewer when
	// the object ends first (exactly size-off then; none at or past the
	// end). A range cannot be checked against the object's digest: the
	// bytes are what the server sent, only their count is checked (a
	// short or long answer is ErrCorrupt naming the key), so a caller
	// treats them as a hint and verifies what it learns by other means.
	// n must be in (0, MaxObjectBytes] and off non-negative (ErrBadRange
	// otherwise: no request is made).
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
}

// ErrBadRange: a GetRange of a negative offset, or of a length not in
// (0, MaxObjectBytes].
var ErrBadRange = errors.New("blobtier: bad byte range")

var _ RangeGetter = (*bucket)(nil)

func (t *bucket) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if off < 0 || n <= 0 || n > MaxObjectBytes {
		return nil, &ObjectError{OpGet, key, fmt.Errorf("%w: %d bytes at offset %d", ErrBadRange, n, off)}
	}
	ctx, cancel, err := t.begin(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	defer cancel()
	r, err := t.b.NewRangeReader(ctx, key, off, n, nil)
	if err != nil {
		return nil, t.readErr(OpGet, key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, n+1))
	if err != nil {
		return nil, t.readErr(OpGet, key, err)
	}
	want := min(n, max(r.Size()-off, 0))
	if int64(len(data)) != want {
		return nil, &ObjectError{OpGet, key, fmt.Errorf("%w: a range of %d bytes at offset %d of a %d-byte object returned %d", ErrCorrupt, n, off, r.Size(), len(data))}
	}
	return data, nil
}

func (w *observed) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	start := time.Now()
	data, err := w.b.GetRange(ctx, key, off, n)
	w.report(OpGet, err, 0, int64(len(data)), start)
	return data, err
}
